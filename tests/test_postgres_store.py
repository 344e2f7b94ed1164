"""What only the PostgreSQL store does: options, format version, SQL-readable payloads,
connection loss, idempotent retries, leases with a heartbeat, notifications across stores."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio
import msgspec
import pytest

from eventlog import (
    APPEND,
    CorruptLogError,
    EventLogError,
    Message,
    Session,
    SessionBusyError,
    SessionNotFoundError,
    StoreWriteError,
    UnsupportedFormatError,
    UserMessage,
    ValidationError,
    open_store,
)
from eventlog._codec import make_row
from eventlog.stores import Batch, LogStore
from eventlog.stores.postgres import PostgresBackend
from tests.pg_children.server import fresh_schema, raw_connection, store_url

pytestmark = [pytest.mark.postgres, pytest.mark.anyio]


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema() as name:
        yield name


@pytest.fixture
async def side(schema: str) -> AsyncIterator[Any]:
    """A plain connection to the test database, with the test's schema on its search path."""
    conn = await raw_connection()
    await conn.execute(f'SET search_path = "{schema}"')
    try:
        yield conn
    finally:
        await conn.close()


def _store(schema: str, **options: Any) -> LogStore:
    return open_store(store_url(schema), **options)


def _user(session: Session, text: str) -> None:
    session.append("user/message", UserMessage(message=Message.user(text)), surface=APPEND)


def _backend(store: LogStore) -> PostgresBackend:
    assert isinstance(store.backend, PostgresBackend)
    return store.backend


async def _wait_until(check: Any, what: str, timeout: float = 20) -> None:
    """Poll an async condition (another connection's state) until it holds; fail saying
    ``what`` was awaited when it does not within ``timeout`` seconds."""
    with anyio.move_on_after(timeout):
        while not await check():
            await anyio.sleep(0.02)
        return
    pytest.fail(f"timed out after {timeout} s waiting until {what}")


# -- options and schema --------------------------------------------------------------------------


def test_options_are_checked_and_the_password_never_shown() -> None:
    url = "postgresql://app:s3cret@db.example:5432/sessions?schema=tenant_a"
    backend = PostgresBackend(url)
    assert (backend.schema, backend.durability, backend.lease_ttl) == ("tenant_a", "power-loss", 10)
    shown = "postgresql://app:***@db.example:5432/sessions?schema=tenant_a"
    assert repr(backend) == f"<PostgresBackend {shown!r} schema='tenant_a'>"
    assert repr(open_store(url)) == f"<LogStore {shown!r} open_sessions=0>"
    with pytest.raises(ValidationError, match="durability must be 'power-loss' or 'process-c"):
        PostgresBackend(url, durability="fast")
    with pytest.raises(ValidationError, match="lease_ttl must be a positive number of seconds"):
        PostgresBackend(url, lease_ttl=0)
    with pytest.raises(ValidationError, match="command_timeout must be a positive number"):
        PostgresBackend(url, command_timeout=-1)
    with pytest.raises(ValidationError, match=r"unknown option\(s\) for 'postgresql://app:\*\*\*@"):
        open_store(url, fsync=True)


async def test_durability_sets_synchronous_commit(schema: str) -> None:
    for durability, setting in (("power-loss", "on"), ("process-crash", "off")):
        async with _store(schema, durability=durability) as store:
            conn = _backend(store)._write_conn
            assert await conn.fetchval("SHOW synchronous_commit") == setting


async def test_the_schema_is_created_once_with_the_format_version(schema: str, side: Any) -> None:
    # Four hosts starting at once on a fresh schema all succeed; one of them creates it.
    backends = [PostgresBackend(store_url(schema)) for _ in range(4)]
    try:
        async with anyio.create_task_group() as tg:
            for backend in backends:
                tg.start_soon(backend.start)
    finally:
        for backend in backends:
            await backend.close()
    assert await side.fetch("SELECT format_version FROM meta") == [(1,)]
    async with _store(schema) as a, _store(schema) as b:
        await a.create(session_id="s")
        assert [i.id for i in await b.list()] == ["s"]


async def test_a_newer_format_version_is_refused(schema: str, side: Any) -> None:
    async with _store(schema):
        pass
    await side.execute("UPDATE meta SET format_version = 2")
    with pytest.raises(
        UnsupportedFormatError,
        match=f"schema '{schema}'\\) has format version 2; this version of eventlog reads up "
        "to version 1",
    ):
        async with _store(schema):
            pass


async def test_payloads_are_queryable_as_json_and_round_trip_exactly(
    schema: str, side: Any
) -> None:
    async with _store(schema) as store:
        session = await store.create(session_id="s", metadata={"b": 1.0, "a": [1, 2]})
        _user(session, "héllo, wörld")
        await session.flush()
        stored = [e async for e in store.read("s")]
    assert stored[0].data.message.text == "héllo, wörld"
    text = await side.fetchval(
        "SELECT data::jsonb -> 'message' -> 'content' -> 0 ->> 'text' FROM events "
        "WHERE session_id = 's' AND type = 'user/message'"
    )
    assert text == "héllo, wörld"
    # Metadata keeps its exact JSON (key order, 1.0 stays a float).
    assert await side.fetchval("SELECT metadata::text FROM sessions") == '{"b":1.0,"a":[1,2]}'


async def test_no_server_is_a_store_write_error_saying_how_to_start_one() -> None:
    with pytest.raises(StoreWriteError, match="connecting failed") as caught:
        async with open_store("postgresql://postgres@127.0.0.1:1/nowhere", connect_timeout=2):
            pass
    assert caught.value.hint is not None and "pg_ctlcluster" in caught.value.hint
    assert isinstance(caught.value.__cause__, OSError)


# -- writing -------------------------------------------------------------------------------------


async def test_connection_loss_during_a_flush_keeps_the_batch_for_the_next_flush(
    schema: str, side: Any
) -> None:
    async with _store(schema) as store:
        session = await store.create(session_id="s")
        _user(session, "before")
        await session.flush()
        backend = _backend(store)
        writer_pid = backend._write_conn.get_server_pid()
        # Hold the session row so the next round waits inside the server, mid-flush.
        lock = side.transaction()
        await lock.start()
        await side.execute("SELECT 1 FROM sessions WHERE id = 's' FOR UPDATE")
        _user(session, "during")
        _user(session, "the outage")
        failure: list[BaseException] = []

        async def flush() -> None:
            try:
                await session.flush()
            except StoreWriteError as exc:
                failure.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(flush)

            async def waiting() -> bool:
                return bool(
                    await side.fetchval(
                        "SELECT count(*) FROM pg_locks WHERE pid = $1 AND NOT granted", writer_pid
                    )
                )

            await _wait_until(waiting, "the writer waits for the row lock")
            # The connection dies while the round is in flight.
            await side.fetchval("SELECT pg_terminate_backend($1)", writer_pid)
        await lock.rollback()
        (error,) = failure
        assert str(error).startswith("session 's': writing seqs 1..2 failed: ")
        assert (session.head, session.durable) == (2, 0)
        # The next flush reconnects and writes the kept batch exactly once.
        await session.flush()
        assert session.durable == 2
        texts = [e.data.message.text async for e in store.read("s")]
        assert texts == ["before", "during", "the outage"]
        assert backend._write_conn.get_server_pid() != writer_pid


async def test_a_round_the_server_does_not_answer_in_time_is_kept_for_the_next_flush(
    schema: str, side: Any
) -> None:
    async with _store(schema, command_timeout=0.5) as store:
        session = await store.create(session_id="s")
        # The server takes too long (here: the row is locked by someone else).
        lock = side.transaction()
        await lock.start()
        await side.execute("SELECT 1 FROM sessions WHERE id = 's' FOR UPDATE")
        _user(session, "slow")
        with pytest.raises(StoreWriteError, match="writing 1 events of 1 sessions failed: ") as e:
            await session.flush()
        translated = e.value.__cause__  # the round's error, chained to the driver's
        assert translated is not None and isinstance(translated.__cause__, TimeoutError)
        await lock.rollback()
        await session.flush()
        assert [e.data.message.text async for e in store.read("s")] == ["slow"]


async def test_a_round_whose_commit_landed_unseen_is_not_written_twice(schema: str) -> None:
    async with _store(schema) as store:
        session = await store.create(session_id="s")
        for i in range(3):
            _user(session, f"m{i}")
        await session.flush()
        backend = _backend(store)
        rows = [row async for chunk in backend.read_rows("s", 0, None) for row in chunk]
        # A retry of the same round (its reply was lost) is recognised by the stored hashes.
        assert await backend.write([Batch("s", -1, rows)]) == set()
        # A retry merged with newer rows writes only the newer ones.
        newer = make_row(
            rows[-1].hash, 3, "user/message", rows[-1].time, APPEND, (), False, rows[-1].data
        )
        assert await backend.write([Batch("s", 1, [*rows[2:], newer])]) == set()
        # A batch whose rows differ from the stored ones is a conflict.
        forged = make_row(rows[0].hash, 1, "user/message", 0, APPEND, (), False, b"{}")
        assert await backend.write([Batch("s", 0, [forged])]) == {"s"}
        stored = [row async for chunk in backend.read_rows("s", 0, None) for row in chunk]
        assert [r.seq for r in stored] == [0, 1, 2, 3]
        assert stored[:3] == rows and stored[3] == newer
        assert (await backend.get_session("s")).head == 3


async def test_two_rounds_expecting_the_same_head_exactly_one_moves_it(
    schema: str, side: Any
) -> None:
    async with _store(schema) as first, _store(schema) as second:
        await first.create(session_id="s")
        await first.create(session_id="other")
        # Both stores write as the same lease owner: only the tail check can tell them apart.
        owner = first._owner
        for sid in ("s", "other"):
            await _backend(second).acquire_lease(sid, owner)
        rows = {
            name: make_row(b"", 0, "user/message", 1, APPEND, (), False, f'"{name}"'.encode())
            for name in ("a", "b")
        }
        bystander = make_row(b"", 0, "user/message", 1, APPEND, (), False, b'"c"')
        # Hold the session row so that both rounds queue up behind it, then let them race.
        lock = side.transaction()
        await lock.start()
        await side.execute("SELECT 1 FROM sessions WHERE id = 's' FOR UPDATE")
        results: dict[str, Any] = {}

        async def write(name: str, store: LogStore, batches: list[Batch]) -> None:
            results[name] = await _backend(store).write(batches)

        writers = [_backend(store)._write_conn.get_server_pid() for store in (first, second)]

        async def queued() -> bool:
            return bool(
                await side.fetchval(
                    "SELECT count(DISTINCT pid) = 2 FROM pg_locks "
                    "WHERE NOT granted AND pid = ANY ($1::int[])",
                    writers,
                )
            )

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(write, "a", first, [Batch("s", -1, [rows["a"]])])
                tg.start_soon(
                    write,
                    "b",
                    second,
                    [Batch("other", -1, [bystander]), Batch("s", -1, [rows["b"]])],
                )
                await _wait_until(queued, "both rounds wait for the row")
                await lock.rollback()
        # Exactly one round moved the head; the loser's bystander was written all the same.
        assert sorted(map(sorted, results.values())) == [[], ["s"]]
        stored = await side.fetch("SELECT session_id, data FROM events ORDER BY session_id")
        winner = "a" if results["a"] == set() else "b"
        assert [tuple(r) for r in stored] == [("other", '"c"'), ("s", f'"{winner}"')]


async def test_a_lost_lease_fences_the_writer_even_before_the_tail_moves(
    schema: str, side: Any
) -> None:
    async with _store(schema) as store:
        session = await store.create(session_id="s")
        _user(session, "mine")
        await session.flush()
        # Another host took the lease over (it has not written yet).
        await side.execute("UPDATE sessions SET writer = 'other-host:1:x' WHERE id = 's'")
        _user(session, "too late")
        with pytest.raises(EventLogError, match="another writer advanced the stored log"):
            await session.flush()
    assert await side.fetchval("SELECT count(*) FROM events") == 1


# -- leases --------------------------------------------------------------------------------------


async def test_the_heartbeat_keeps_a_lease_alive_past_its_ttl(schema: str, side: Any) -> None:
    async with _store(schema, lease_ttl=1.5) as store, _store(schema, lease_ttl=1.5) as other:
        await store.create(session_id="s")
        first = await side.fetchval("SELECT lease_until FROM sessions")

        async def renewed_past_first_expiry() -> bool:
            return bool(
                await side.fetchval(
                    "SELECT clock_timestamp() > $1 AND lease_until > clock_timestamp() "
                    "FROM sessions",
                    first,
                )
            )

        await _wait_until(renewed_past_first_expiry, "the lease is renewed")
        with pytest.raises(SessionBusyError, match="session 's' is open for writing by "):
            await other.open("s")


async def test_an_expired_lease_is_taken_over(schema: str, side: Any) -> None:
    async with _store(schema) as store:
        await store.create(session_id="s")
    # A host that died holding the lease: its expiry has passed and nobody renews it.
    await side.execute(
        "UPDATE sessions SET writer = 'dead-host:1:x', lease_until = clock_timestamp()"
    )
    async with _store(schema) as store:
        session = await store.open("s")
        _user(session, "taken over")
        await session.flush()
        assert await side.fetchval("SELECT writer FROM sessions") == store._owner
    assert await side.fetchval("SELECT writer FROM sessions") is None


async def test_a_live_lease_names_its_holder(schema: str, side: Any) -> None:
    async with _store(schema) as store:
        await store.create(session_id="s")
    await side.execute(
        "UPDATE sessions SET writer = 'host-b:42:abc', "
        "lease_until = clock_timestamp() + interval '1 hour'"
    )
    async with _store(schema) as store:
        with pytest.raises(
            SessionBusyError,
            match=r"session 's' is open for writing by host-b:42:abc \(its lease runs 3\d\d\d\.\d "
            r"s more unless renewed\)",
        ):
            await store.open("s")
        with pytest.raises(SessionNotFoundError, match="session 'x' does not exist"):
            await store.open("x")


# -- following -----------------------------------------------------------------------------------


async def _follow(store: LogStore, sid: str, until: int, seen: list[int]) -> None:
    async for event in store.follow(sid):
        seen.append(event.seq)
        if event.seq == until:
            return


@pytest.mark.parametrize("durability", ["power-loss", "process-crash"])
async def test_follow_is_woken_by_another_store_through_notify(
    schema: str, durability: str
) -> None:
    # power-loss notifies after the commit, process-crash inside the write transaction.
    async with _store(schema, durability=durability) as writer, _store(schema) as reader:
        session = await writer.create(session_id="s")
        seen: list[int] = []
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_follow, reader, "s", 29, seen)
                for i in range(30):
                    _user(session, f"m{i}")
                    if i % 3 == 0:
                        await session.flush()
        assert seen == list(range(30))


async def test_the_last_round_of_a_closing_store_is_notified(schema: str) -> None:
    async with _store(schema) as reader:
        async with _store(schema) as writer:
            await writer.create(session_id="s")
        seen: list[int] = []

        async def following() -> bool:
            return _backend(reader)._listener._waiters.get("s") is not None

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_follow, reader, "s", 2, seen)
                await _wait_until(following, "the follower waits for news")
                # Written only by the writer's final round as its store closes.
                async with _store(schema) as writer:
                    session = await writer.open("s")
                    for i in range(3):
                        _user(session, f"m{i}")
        assert seen == [0, 1, 2]


async def test_follow_survives_the_loss_of_the_listen_connection(schema: str, side: Any) -> None:
    await _follow_across_a_lost_connection(
        schema, side, lambda writer, reader: _backend(reader)._listener
    )


async def test_follow_survives_the_loss_of_the_writers_notify_connection(
    schema: str, side: Any
) -> None:
    await _follow_across_a_lost_connection(
        schema, side, lambda writer, reader: _backend(writer)._notifier
    )


async def _follow_across_a_lost_connection(
    schema: str, side: Any, holder: Callable[[LogStore, LogStore], Any]
) -> None:
    """A follower sees every event although the connection ``holder(writer, reader)`` owns
    is terminated by the server between two flushes."""
    async with _store(schema) as writer, _store(schema) as reader:
        session = await writer.create(session_id="s")
        owner = holder(writer, reader)
        seen: list[int] = []
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_follow, reader, "s", 9, seen)
                for i in range(5):
                    _user(session, f"m{i}")
                await session.flush()

                async def caught_up() -> bool:
                    return len(seen) == 5 and owner._conn is not None

                await _wait_until(caught_up, "the follower saw the first events")
                await side.fetchval("SELECT pg_terminate_backend($1)", owner._conn.get_server_pid())
                for i in range(5, 10):
                    _user(session, f"m{i}")
                await session.flush()
        assert seen == list(range(10))


async def test_a_follower_learns_that_its_session_was_deleted(schema: str) -> None:
    async with _store(schema) as writer, _store(schema) as reader:
        session = await writer.create(session_id="s")
        _user(session, "only")
        await session.aclose()
        seen: list[int] = []
        errors: list[SessionNotFoundError] = []

        saw_one = anyio.Event()

        async def follow() -> None:
            try:
                async for event in reader.follow("s"):
                    seen.append(event.seq)
                    saw_one.set()
            except SessionNotFoundError as exc:
                errors.append(exc)

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(follow)
                await saw_one.wait()  # the follower saw the event
                await writer.delete("s")
        assert seen == [0]
        assert [str(e) for e in errors] == ["session 's' does not exist"]


async def test_listing_reports_a_session_whose_metadata_is_damaged(schema: str, side: Any) -> None:
    async with _store(schema) as store:
        await store.create(session_id="a")
        await store.create(session_id="b", metadata={"k": "v"})
        await side.execute("UPDATE sessions SET metadata = '[1]' WHERE id = 'a'")
        infos = await store.list()
    assert [(i.id, i.error is not None) for i in infos] == [("a", True), ("b", False)]
    assert msgspec.to_builtins(infos[1].metadata) == {"k": "v"}
    async with _store(schema) as store:
        with pytest.raises(CorruptLogError, match="session 'a': stored metadata does not decode"):
            await store.open("a")
