"""Store-side hardening on every store (memory, SQLite on both write paths, PostgreSQL) that
needs more than the conformance suite's hooks (``eventlog.testing.StoreConformance`` holds the
rest: one unstorable row per round, stale writers after delete, flush after close, open(wait=)):
the stored head checked on open against raw SQL edits; closing a store whose writes fail;
``FaultyStore`` really faulting; ``Agent.resume(wait=)``; dead owners' leases; rows below the
writer's check.
"""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent import Agent, ScriptedModel
from eventlog import (
    APPEND,
    ClosedError,
    CorruptLogError,
    Message,
    Session,
    SessionBusyError,
    StoreWriteError,
    TurnEnd,
    TurnStart,
    UserMessage,
    open_store,
)
from eventlog._codec import make_row
from eventlog.stores import Batch, LogStore, MemoryData
from eventlog.testing import lease_refusals
from recovery.testing import FaultyStore, SimulatedCrash
from tests.pg_children.server import fresh_schema, raw_connection, store_url

pytestmark = pytest.mark.anyio

HOST_DEAD_OWNER = "{host}:2147483647:gone"


@dataclass
class Place:
    """Where a store's data lives; ``store()`` opens another store on the same data."""

    kind: str
    store: Callable[..., LogStore]
    path: Path | None = None
    schema: str | None = None


STORES = [
    "memory",
    "sqlite",
    "sqlite-thread",
    pytest.param("postgres", marks=pytest.mark.postgres),
]


@contextmanager
def _make_place(kind: str, tmp_path: Path) -> Iterator[Place]:
    if kind == "memory":
        data = MemoryData()
        yield Place(kind, lambda **o: open_store("memory:", data=data, **o))
    elif kind.startswith("sqlite"):
        path = tmp_path / "s.db"
        # Only the writer thread: every round goes through it, none is written on the loop.
        extra = {"inline_write_bytes": 0} if kind == "sqlite-thread" else {}
        yield Place(kind, lambda **o: open_store(f"sqlite:///{path}", **extra, **o), path=path)
    else:
        with fresh_schema() as schema:
            yield Place(kind, lambda **o: open_store(store_url(schema), **o), schema=schema)


@pytest.fixture(params=STORES)
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    with _make_place(request.param, tmp_path) as made:
        yield made


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def sql_place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    """A store with raw SQL tables to damage."""
    with _make_place(request.param, tmp_path) as made:
        yield made


def say(session: Session, text: str) -> None:
    session.append("user/message", UserMessage(message=Message.user(text)), surface=APPEND)


async def texts(store: LogStore, session_id: str) -> list[str]:
    """The user texts stored in a session, read through a fresh read."""
    return [
        e.data.message.content[0].text
        async for e in store.read(session_id)
        if e.type == "user/message"
    ]


# -- one bad row, one round --------------------------------------------------------------------


# -- the stored head --------------------------------------------------------------------------


async def _side_sql(place: Place, sql: str) -> None:
    """Run ``sql`` on the raw tables (the SQL is written for both SQLite and PostgreSQL)."""
    if place.path is not None:
        with sqlite3.connect(place.path) as db:
            db.execute(sql)
        db.close()
    else:
        assert place.schema is not None
        conn = await raw_connection()
        try:
            await conn.execute(f'SET search_path = "{place.schema}"')
            await conn.execute(sql)
        finally:
            await conn.close()


@pytest.mark.parametrize(
    ("damage", "seq", "message"),
    [
        (
            "DELETE FROM events WHERE session_id = 's' AND seq = 2",
            2,
            "session 's', seq 2: the stored head is 2 but the events from seq 2 are missing",
        ),
        (
            "UPDATE sessions SET head = 5 WHERE id = 's'",
            3,
            "session 's', seq 3: the stored head is 5 but the events from seq 3 are missing",
        ),
        (
            "UPDATE sessions SET head = 0 WHERE id = 's'",
            1,
            "session 's', seq 1: the stored head is 0 but events up to seq 2 are stored: the "
            "head was altered",
        ),
    ],
    ids=["last-row-deleted", "head-raised", "head-lowered"],
)
async def test_open_checks_the_stored_head(
    sql_place: Place, damage: str, seq: int, message: str
) -> None:
    place = sql_place
    async with place.store() as store:
        session = await store.create(session_id="s")
        for text in ("a", "b", "c"):
            say(session, text)
        await session.aclose()
    # The rows or the head are changed behind the store's back.
    await _side_sql(place, damage)
    async with place.store() as store:
        with pytest.raises(CorruptLogError) as caught:
            await store.open("s")
        assert (caught.value.seq, caught.value.message) == (seq, message)
        # Salvage reads the events before the seq in doubt, and says why it stopped.
        salvaged = await store.open("s", salvage=True)
        assert len(await salvaged.events()) == seq
        assert salvaged.salvage_fault is not None
        assert salvaged.salvage_fault.message == message
        # The refused open left no lease behind.
        with pytest.raises(CorruptLogError):
            await store.open("s")


async def test_open_checks_the_stored_head_on_memory() -> None:
    data = MemoryData()
    async with open_store("memory:", data=data) as store:
        session = await store.create(session_id="s")
        say(session, "a")
        say(session, "b")
        await session.aclose()
    # The last row disappears from the memory store's "disk".
    del data.rows["s"][-1]
    async with open_store("memory:", data=data) as store:
        with pytest.raises(CorruptLogError) as caught:
            await store.open("s")
        assert caught.value.seq == 1


# -- a stale writer after delete ----------------------------------------------------------------


# -- closing while writes fail -----------------------------------------------------------------


async def test_closing_a_store_whose_writes_fail_releases_the_lease(place: Place) -> None:
    faulty = FaultyStore(place.store(), fail_at=1, failures=1000)
    async with faulty as store:
        session = await store.create(session_id="s")
        say(session, "stored")
        await session.flush()
        say(session, "lost")
        with pytest.raises(StoreWriteError, match="injected write failure"):
            await session.flush()
    # The close went through although its final write failed; the unwritten event was
    # discarded (documented), and the session and the store refuse to flush again.
    assert faulty.writes >= 3
    with pytest.raises(ClosedError):
        await session.flush()
    # The next store of this process takes the session at once: the lease was released.
    async with place.store() as store:
        reopened = await store.open("s")
        assert [e.data.message.content[0].text for e in await reopened.events()] == ["stored"]
        await reopened.aclose()


class _ReleaseFails(FaultyStore):
    """Writes fail, and releasing a lease fails too (as on a full disk)."""

    async def _release(self, session: Session) -> None:
        self._open.pop(session.id, None)
        raise StoreWriteError("releasing the lease failed (injected)")


async def test_a_lease_left_by_a_closed_store_of_this_process_is_taken_over(
    place: Place,
) -> None:
    async with _ReleaseFails(place.store(), fail_at=0, failures=1000) as store:
        session = await store.create(session_id="s")
        say(session, "lost")
    # The stored lease still names the closed store, which no longer exists: taken over.
    async with place.store() as store:
        reopened = await store.open("s")
        assert reopened.head == -1
        await reopened.aclose()


# -- flush after close -------------------------------------------------------------------------


# -- FaultyStore really faults every store ------------------------------------------------------


async def test_faulty_store_fails_and_crashes_on_every_store(place: Place) -> None:
    async with FaultyStore(place.store(), fail_at=1) as store:
        session = await store.create(session_id="s")
        say(session, "a")
        await session.flush()  # write 0
        say(session, "b")
        with pytest.raises(StoreWriteError, match="write 1: injected write failure"):
            await session.flush()
        await session.flush()  # write 2 retries the batch
        assert store.writes == 3
    async with FaultyStore(place.store(), crash_at=1) as store:
        session = await store.open("s")
        say(session, "c")
        await session.flush()  # write 0
        say(session, "d")
        with pytest.raises(StoreWriteError, match="write 1: simulated crash before") as caught:
            await session.flush()
        assert store.crashed and isinstance(caught.value.__cause__, SimulatedCrash)
    # After the "crash" the store holds exactly what was written before it.
    async with place.store() as store:
        assert await texts(store, "s") == ["a", "b", "c"]


# -- leases of gone owners; waiting for live ones -----------------------------------------------


async def test_agent_resume_passes_wait_through(place: Place) -> None:
    async with place.store() as first, place.store() as second:
        holder = await first.create(session_id="s")
        holder.append("turn/start", TurnStart(turn=1))
        holder.append("turn/end", TurnEnd(turn=1, reason="completed"))
        # A short wait runs out while the holder lives.
        with pytest.raises(SessionBusyError):
            await Agent.resume(second, "s", ScriptedModel([]), wait=0.05)
        # A long one returns once the holder closes, which happens only after the waiting
        # resume was refused at least once (seen through the backend): it really waited.
        refused = lease_refusals(second)
        agents: list[Agent] = []
        async with anyio.create_task_group() as tg:

            async def resume() -> None:
                agents.append(await Agent.resume(second, "s", ScriptedModel([]), wait=60))

            tg.start_soon(resume)
            await refused.wait()
            await holder.aclose()
        assert agents[0].session.head == 1
        await agents[0].session.aclose()


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema() as name:
        yield name


@pytest.mark.postgres
async def test_postgres_takes_over_a_dead_local_owners_lease_at_once(schema: str) -> None:
    async with open_store(store_url(schema), lease_ttl=3600) as store:
        await (await store.create(session_id="s")).aclose()
        conn = await raw_connection()
        try:
            # A lease of a process of this host that is gone, an hour from expiring.
            await conn.execute(
                f'UPDATE "{schema}".sessions SET writer = $1, '
                "lease_until = clock_timestamp() + interval '1 hour'",
                HOST_DEAD_OWNER.format(host=socket.gethostname()),
            )
            session = await store.open("s")  # at once, no wait
            await session.aclose()
            # A live process of another host keeps its lease until it expires.
            await conn.execute(
                f'UPDATE "{schema}".sessions SET writer = $1, '
                "lease_until = clock_timestamp() + interval '1 hour'",
                "elsewhere:1:remote",
            )
            with pytest.raises(SessionBusyError, match="open for writing by elsewhere:1"):
                await store.open("s")
        finally:
            await conn.close()


@pytest.mark.parametrize("path_", ["on-loop", "thread"])
async def test_sqlite_refuses_an_unstorable_row_that_reaches_it(tmp_path: Path, path_: str) -> None:
    """Below the writer's check: a row with a 64-bit overflow handed to the SQLite backend
    itself fails its round with ``StoreWriteError`` and is never stored as REAL."""
    db = tmp_path / "s.db"
    # A lone session's small round is written on the loop's thread; with inline_write_bytes=0
    # every round goes to the writer thread.
    options = {} if path_ == "on-loop" else {"inline_write_bytes": 0}
    async with open_store(f"sqlite:///{db}", **options) as store:
        await store.create(session_id="s")
        row = make_row(b"", 0, "turn/start", 2**63, None, (), False, b'{"turn":1}')
        batch = [Batch("s", -1, [row])]
        backend: Any = store.backend
        if path_ == "on-loop":
            await backend._call_writer(lambda _connection: None)  # its queued jobs answered
            assert backend._writer.idle
        with pytest.raises(StoreWriteError):
            await backend.write(batch)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM events").fetchone() == (0,)
        assert conn.execute("SELECT head FROM sessions").fetchone() == (-1,)
    conn.close()


@pytest.mark.postgres
async def test_postgres_refuses_an_unstorable_row_that_reaches_it(schema: str) -> None:
    """Below the writer's check, PostgreSQL's round fails with ``StoreWriteError`` too, and
    the store keeps working."""
    async with open_store(store_url(schema)) as store:
        session = await store.create(session_id="s")
        row = make_row(b"", 0, "turn/start", 2**63, None, (), False, b'{"turn":1}')
        with pytest.raises(StoreWriteError):
            await store.backend.write([Batch("s", -1, [row])])
        # Nothing was written, and the next round (a good one) goes through.
        say(session, "fine")
        await session.flush()
        assert await texts(store, "s") == ["fine"]
