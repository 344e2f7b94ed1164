"""A read-only reader of a session that is deleted and created again under the same id while it
reads: its pages may come from both sessions (a read is one query per page, so writers never
wait on a reader). What it reports must be true of one session or the other, never damage: the
two sessions are each healthy. On SQLite and PostgreSQL, whose pages are 1000 and 2000 rows.

The race is placed, not waited for: the reader's store reads its pages through its real backend,
and once, right after the first page, a second store (another connection to the same database)
deletes the session and creates it again with other events.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path

import anyio
import msgspec
import pytest

from agent.report import load_session
from eventlog import (
    APPEND,
    EventTypes,
    ImagePart,
    Message,
    SessionNotFoundError,
    UserMessage,
    open_store,
)
from eventlog.stores import LogStore, Row, SessionRecord, Snapshots
from tests.pg_children.server import fresh_schema, store_url

pytestmark = pytest.mark.anyio

SID = "again"
#: More events than one page on either store (SQLite 1000, PostgreSQL 2000).
FIRST = 2500


class Tick(msgspec.Struct, frozen=True, kw_only=True):
    n: int


TYPES = EventTypes()
TYPES.register("app/tick", Tick, ignorable=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
    else:
        with fresh_schema() as schema:
            yield store_url(schema)


async def write(store: LogStore, count: int, base: int) -> None:
    """Create the session holding ``count`` ticks numbered from ``base``."""
    session = await store.create(session_id=SID)
    for n in range(base, base + count):
        session.append("app/tick", Tick(n=n))
    await session.flush()
    await session.aclose()


def replace_after_first_page(
    reader: LogStore, writer: LogStore, count: int, monkeypatch: pytest.MonkeyPatch
) -> Callable[[], bool]:
    """Make the reader's next read of rows, after its first page, wait while ``writer`` deletes
    the session and creates it again with ``count`` other events. Returns whether it fired."""
    backend = reader.backend
    read_rows = backend.read_rows
    fired: list[bool] = []

    def hooked(sid: str, from_seq: int, limit: int | None) -> AsyncIterator[Sequence[Row]]:
        async def pages() -> AsyncIterator[Sequence[Row]]:
            async for page in read_rows(sid, from_seq, limit):
                yield page
                if not fired:
                    fired.append(True)
                    await writer.delete(SID)
                    await write(writer, count, base=10**6)

        return pages()

    monkeypatch.setattr(backend, "read_rows", hooked)
    return lambda: bool(fired)


@pytest.mark.parametrize("second", [500, 0, FIRST + 500], ids=["shorter", "empty", "longer"])
async def test_a_session_replaced_under_a_read_only_open_is_not_reported_damaged(
    url: str, second: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with (
        open_store(url, types=TYPES) as writer,
        open_store(url, types=TYPES) as reader,
    ):
        # A session of more than one page, then a reader whose first page is its.
        await write(writer, FIRST, base=0)
        fired = replace_after_first_page(reader, writer, second, monkeypatch)
        # The read-only open reads the session stored now, whole, and finds nothing wrong
        # (before: a hash mismatch at the page boundary, or "the head was altered").
        session = await reader.open(SID, salvage=True)
        assert fired()
        assert session.salvage_fault is None
        assert [e.data.n for e in await session.events()] == list(range(10**6, 10**6 + second))
        await session.aclose()
        # The report loader (every read-only command) likewise.
        loaded = await load_session(reader, SID)
        assert loaded.fault is None and loaded.stored_events == second
        await loaded.session.aclose()


async def test_a_damaged_session_is_still_reported_after_the_check(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The second session's event 1200 is damaged: reads of it stop there, and say so (the
    # session held still while the last read read it).
    async with (
        open_store(url, types=TYPES) as writer,
        open_store(url, types=TYPES) as reader,
    ):
        await write(writer, FIRST, base=0)
        fired = replace_after_first_page(reader, writer, FIRST, monkeypatch)
        original = reader.backend.read_rows

        def damaged(sid: str, from_seq: int, limit: int | None) -> AsyncIterator[Sequence[Row]]:
            async def pages() -> AsyncIterator[Sequence[Row]]:
                async for page in original(sid, from_seq, limit):
                    yield [
                        msgspec.structs.replace(r, data=r.data.replace(b"1001200", b"1001201"))
                        for r in page
                    ]

            return pages()

        monkeypatch.setattr(reader.backend, "read_rows", damaged)
        session = await reader.open(SID, salvage=True)
        assert fired()
        assert session.salvage_fault is not None and session.salvage_fault.seq == 1200
        assert session.head == 1199
        await session.aclose()


async def test_verify_of_a_session_deleted_while_checked_says_gone_not_damaged(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with (
        open_store(url, types=TYPES) as writer,
        open_store(url, types=TYPES) as reader,
    ):
        # A session showing an image no other session shows.
        digest = await writer.put_attachment(b"the only copy")
        session = await writer.create(session_id=SID)
        image = ImagePart(media_type="image/png", attachment=digest)
        message = Message(id="m", role="user", content=(image,))
        session.append("user/message", UserMessage(message=message), surface=APPEND)
        await session.flush()
        await session.aclose()
        # The check reads the references, then the session (and with it the image's bytes)
        # is deleted before the bytes are read.
        read_rows = reader.backend.read_rows

        def then_delete(sid: str, from_seq: int, limit: int | None) -> AsyncIterator[Sequence[Row]]:
            async def pages() -> AsyncIterator[Sequence[Row]]:
                async for page in read_rows(sid, from_seq, limit):
                    yield page
                await writer.delete(SID)

            return pages()

        monkeypatch.setattr(reader.backend, "read_rows", then_delete)
        # The session is gone, which is what verify says (not a missing attachment).
        with pytest.raises(SessionNotFoundError):
            await reader.verify_attachments(SID)


async def test_verify_snapshot_of_a_session_replaced_while_checked_checks_the_new_one(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with (
        open_store(url, types=TYPES, snapshot_every=10) as writer,
        open_store(url, types=TYPES) as replacer,
        open_store(url, types=TYPES) as reader,
    ):
        # A session with a snapshot (at seq 9 or 19: they are written in the background).
        session = await writer.create(session_id=SID)
        for n in range(25):
            session.append("app/tick", Tick(n=n))
            await session.flush()
        await session.aclose()
        assert await writer.stored_snapshot(SID) is not None
        # The check reads that snapshot; before it reads the log, the session is deleted and
        # created again with other events (and no snapshot).
        backend = reader.backend
        assert isinstance(backend, Snapshots)
        read_snapshot = backend.read_snapshot
        fired: list[bool] = []

        async def then_replace(sid: str) -> tuple[int, bytes, bytes] | None:
            stored = await read_snapshot(sid)
            if not fired:
                fired.append(True)
                await replacer.delete(SID)
                await write(replacer, 30, base=100)  # a store taking no snapshot this soon
            return stored

        monkeypatch.setattr(backend, "read_snapshot", then_replace)
        # The old snapshot is not compared with the new log (before: "does not match the
        # log"); the session stored now is checked, and holds no snapshot.
        assert await reader.verify_snapshot(SID) is None
        assert fired


@pytest.mark.parametrize("after", [-1, 1])
async def test_follow_of_a_session_replaced_under_it_ends_as_deleted(url: str, after: int) -> None:
    async with (
        open_store(url, types=TYPES) as writer,
        open_store(url, types=TYPES) as reader,
    ):
        # A follower reads the session's three events (from the start, or after seq 1).
        await write(writer, 3, base=0)
        seen: list[int] = []
        with pytest.raises(SessionNotFoundError, match="deleted while it was followed"):
            async for event in reader.follow(SID, after=after):
                seen.append(event.data.n)
                if event.data.n >= 100:
                    break  # the second session's: a test that fails, not one that hangs
                if event.seq == 2:
                    # The session is deleted and created again, longer, under the same id.
                    await writer.delete(SID)
                    await write(writer, 6, base=100)
        # It saw the first session's events and none of the second's (before: it went on
        # with the second session's seqs 3, 4, 5, as if one log).
        assert seen == [0, 1, 2][after + 1 :]


async def test_follow_after_a_seq_not_yet_stored_chains_from_it_when_it_comes(url: str) -> None:
    async with (
        open_store(url, types=TYPES) as writer,
        open_store(url, types=TYPES) as reader,
    ):
        # A follower waits after seq 2 of a session holding one event.
        session = await writer.create(session_id=SID)
        session.append("app/tick", Tick(n=0))
        await session.flush()
        seen: list[int] = []

        async def follow() -> None:
            async for event in reader.follow(SID, after=2):
                seen.append(event.seq)
                if event.seq == 4:
                    return

        async with anyio.create_task_group() as tg:
            tg.start_soon(follow)
            # The writer goes on to seq 4: the follower gets seqs 3 and 4, the chain checked
            # from the stored seq 2.
            for n in range(1, 5):
                session.append("app/tick", Tick(n=n))
                await session.flush()
        assert seen == [3, 4]
        await session.aclose()


async def test_the_report_loader_gives_the_record_and_events_of_one_session(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with (
        open_store(url, types=TYPES) as writer,
        open_store(url, types=TYPES) as reader,
    ):
        # A session of ten events, its record saying so.
        first = await writer.create(session_id=SID, metadata={"which": "first"})
        for n in range(10):
            first.append("app/tick", Tick(n=n))
        await first.flush()
        await first.aclose()
        # The loader reads the record; right after, the session is deleted and created again
        # with three other events and other metadata.
        get_session = reader.backend.get_session
        fired: list[bool] = []

        async def then_replace(sid: str) -> SessionRecord:
            record = await get_session(sid)
            if not fired:
                fired.append(True)
                await writer.delete(SID)
                second = await writer.create(session_id=SID, metadata={"which": "second"})
                for n in range(100, 103):
                    second.append("app/tick", Tick(n=n))
                await second.flush()
                await second.aclose()
            return record

        monkeypatch.setattr(reader.backend, "get_session", then_replace)
        # What it loads is one session: the second's record with the second's events (before:
        # the first's record, counting its ten events, over the second's three).
        loaded = await load_session(reader, SID)
        assert fired
        assert loaded.record.metadata == {"which": "second"}
        assert loaded.stored_events == 3
        assert [e.data.n for e in await loaded.session.events()] == [100, 101, 102]
        await loaded.session.aclose()
