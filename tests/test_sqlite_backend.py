"""What is particular to the SQLite store: URLs, options, the file format, leases across
processes, chunked reads, and that every connection and thread is gone after close."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest

from eventlog import (
    APPEND,
    CorruptLogError,
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
from eventlog.stores.sqlite import SQLiteBackend, parse_sqlite_url

pytestmark = pytest.mark.anyio
HOST = socket.gethostname()


def side_door(path: Path, sql: str, *params: object) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as db:
        found = db.execute(sql, params).fetchall()
    db.close()
    return found


def say(session: Session, text: str) -> None:
    session.append("user/message", UserMessage(message=Message.user(text)), surface=APPEND)


def eventlog_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("eventlog-sqlite")]


# -- URLs and options ----------------------------------------------------------------------------


def test_urls_name_relative_and_absolute_paths() -> None:
    assert parse_sqlite_url("sqlite:///sessions.db") == "sessions.db"
    assert parse_sqlite_url("sqlite:///data/s.db") == "data/s.db"
    assert parse_sqlite_url("sqlite:////var/lib/s.db") == "/var/lib/s.db"


@pytest.mark.parametrize(
    "url", ["sqlite://", "sqlite:///", "sqlite:///dir/", "sqlite://host/s.db", "sqlite:///:memory:"]
)
def test_a_malformed_url_is_refused(url: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_sqlite_url(url)
    assert caught.value.message == (
        f"malformed SQLite URL {url!r}: use 'sqlite:///relative/path.db' or "
        "'sqlite:////absolute/path.db'"
    )


def test_options_are_checked(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    with pytest.raises(ValidationError, match=r"unknown option\(s\) for .*: bogus"):
        open_store(url, bogus=1)
    with pytest.raises(
        ValidationError, match="durability must be 'power-loss' or 'process-crash', got 'fast'"
    ):
        open_store(url, durability="fast")
    with pytest.raises(ValidationError, match="busy_timeout must be a positive number"):
        open_store(url, busy_timeout=0)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValidationError, match="inline_write_bytes must be a whole number"):
            open_store(url, inline_write_bytes=bad)


@pytest.mark.parametrize(("durability", "level"), [("power-loss", 2), ("process-crash", 1)])
async def test_durability_chooses_the_sync_level(
    tmp_path: Path, durability: str, level: int
) -> None:
    async with open_store(f"sqlite:///{tmp_path / 's.db'}", durability=durability) as store:
        backend = store.backend
        assert isinstance(backend, SQLiteBackend)
        found = await backend._writer.call(lambda c: c.execute("PRAGMA synchronous").fetchone())
        assert found == (level,)
    assert side_door(tmp_path / "s.db", "PRAGMA journal_mode") == [("wal",)]


# -- the file ------------------------------------------------------------------------------------


async def test_payloads_are_json_text_that_auditors_can_query(tmp_path: Path) -> None:
    async with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        session = await store.create(session_id="s")
        say(session, "héllo \u2603")
        await session.flush()
    found = side_door(
        tmp_path / "s.db",
        "SELECT typeof(data), json_extract(data, '$.message.content[0].text'), ignorable "
        "FROM events WHERE session_id = 's'",
    )
    assert found == [("text", "héllo \u2603", 0)]


async def test_odd_and_large_payloads_come_back_byte_exact(tmp_path: Path) -> None:
    texts = [
        "",
        "\x00 nul, \u2028 line separator, \U0001f389 emoji",
        '"quoted" \\',
        "x" * 1_000_000,
    ]
    async with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        session = await store.create(session_id="s")
        for text in texts:
            say(session, text)
        await session.flush()
    async with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        again = await store.open("s")  # verifies every hash: the bytes are exactly the same
        assert [e.data.message.text for e in await again.events()] == texts


async def test_a_newer_format_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with open_store(f"sqlite:///{path}"):
        pass
    side_door(path, "UPDATE meta SET format_version = 2")
    with pytest.raises(UnsupportedFormatError) as caught:
        async with open_store(f"sqlite:///{path}"):
            pass
    assert caught.value.message == (
        f"SQLite database {path} has format version 2, newer than this eventlog reads (version 1)"
    )
    assert caught.value.hint == "upgrade eventlog to open it"
    assert eventlog_threads() == []


async def test_a_file_that_is_not_a_database_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    path.write_bytes(b"this is not a database, it is a shopping list\n" * 100)
    with pytest.raises(CorruptLogError, match=r"opening the database failed: file is not a data"):
        async with open_store(f"sqlite:///{path}"):
            pass
    assert eventlog_threads() == []


async def test_a_missing_directory_is_a_write_error(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "s.db"
    with pytest.raises(StoreWriteError) as caught:
        async with open_store(f"sqlite:///{path}"):
            pass
    assert caught.value.message == (
        f"SQLite database {path}: opening the database failed: unable to open database file"
    )
    assert isinstance(caught.value.__cause__, sqlite3.OperationalError)
    assert eventlog_threads() == []


async def test_no_thread_is_left_after_close(tmp_path: Path) -> None:
    async with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        await store.create(session_id="s")
        assert eventlog_threads() == ["eventlog-sqlite-writer"]
    assert eventlog_threads() == []


async def test_list_reports_a_damaged_session_and_lists_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with open_store(f"sqlite:///{path}") as store:
        for name in ("a", "b", "c"):
            await (await store.create(session_id=name)).aclose()
        side_door(path, "UPDATE sessions SET metadata = '{broken' WHERE id = 'b'")
        infos = await store.list()
        assert [(i.id, i.error is None) for i in infos] == [("a", True), ("b", False), ("c", True)]
        assert infos[1].error is not None
        assert infos[1].error.startswith("the session's record is damaged: JSON is malformed")
        with pytest.raises(CorruptLogError, match="session 'b': its record in the sessions table"):
            await store.open("b")


# -- where a write round runs ----------------------------------------------------------------------


async def note_inserting_threads(backend: SQLiteBackend) -> list[str]:
    """Record the name of the thread that inserts each event row, from inside SQLite: a
    function on the writer connection called by a temporary trigger of that connection."""
    names: list[str] = []

    def install(connection: sqlite3.Connection) -> None:
        connection.create_function(
            "note_thread", 0, lambda: names.append(threading.current_thread().name)
        )
        connection.execute(
            "CREATE TEMP TRIGGER note AFTER INSERT ON events BEGIN SELECT note_thread(); END"
        )

    await backend._writer.call(install)
    return names


async def test_a_small_round_is_written_on_the_loop_and_a_large_one_on_the_writer_thread(
    tmp_path: Path,
) -> None:
    async with open_store(f"sqlite:///{tmp_path / 's.db'}", inline_write_bytes=4096) as store:
        backend = store.backend
        assert isinstance(backend, SQLiteBackend)
        session = await store.create(session_id="s")
        names = await note_inserting_threads(backend)
        say(session, "small")
        await session.flush()
        assert names == [threading.current_thread().name]
        names.clear()
        say(session, "x" * 5000)  # past inline_write_bytes
        await session.flush()
        assert names == ["eventlog-sqlite-writer"]
    assert side_door(tmp_path / "s.db", "SELECT seq FROM events") == [(0,), (1,)]


async def test_while_another_session_is_active_rounds_go_to_the_thread_to_be_shared(
    tmp_path: Path,
) -> None:
    async with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        backend = store.backend
        assert isinstance(backend, SQLiteBackend)
        a, b = await store.create(session_id="a"), await store.create(session_id="b")
        names = await note_inserting_threads(backend)
        say(a, "a alone")
        await a.flush()  # nobody else has committed: written in place
        say(b, "b, while a was active a moment ago")
        await b.flush()  # a may commit again and share the round: the thread writes it
        assert names == [threading.current_thread().name, "eventlog-sqlite-writer"]
        # The background writer's rounds never block the loop: nobody waits for them.
        say(b, "nobody flushes this one")
        # follow() yields only stored events, and the store's own writes wake it at once.
        with anyio.fail_after(10):
            async for event in store.follow("b", after=b.head - 1):
                assert event.seq == b.head
                break
        assert names[2:] == ["eventlog-sqlite-writer"]


async def test_a_round_that_would_wait_for_another_writer_waits_on_the_thread(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    async with open_store(f"sqlite:///{path}") as store:
        backend = store.backend
        assert isinstance(backend, SQLiteBackend)
        session = await store.create(session_id="s")
        names = await note_inserting_threads(backend)
        # Another connection (as another process would) holds the write lock.
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        flushed = anyio.Event()

        async def flush() -> None:
            say(session, "waits for the lock")
            await session.flush()
            flushed.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(flush)
            # The flush waits for the lock without blocking the event loop: every task comes to
            # rest (written in place, it would hold the loop in SQLite's busy handler instead).
            with anyio.fail_after(10):
                await anyio.wait_all_tasks_blocked()
            assert not flushed.is_set()
            other.execute("COMMIT")
            other.close()
            with anyio.fail_after(30):
                await flushed.wait()
        assert names == ["eventlog-sqlite-writer"]
        assert session.durable == 0
    assert side_door(path, "SELECT seq FROM events") == [(0,)]


# -- leases ----------------------------------------------------------------------------------------


async def test_a_lease_is_taken_over_only_from_a_dead_process(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with open_store(f"sqlite:///{path}") as store:
        await (await store.create(session_id="s")).aclose()
        # A pid that cannot exist: its owner is dead, the lease is taken over.
        side_door(path, "UPDATE sessions SET writer = ?", f"{HOST}:2147483647:gone")
        await (await store.open("s")).aclose()
        # A killed process not yet reaped by its parent (a zombie) is dead too.
        child = subprocess.Popen([sys.executable, "-c", "pass"])
        stat = Path(f"/proc/{child.pid}/stat")
        deadline = time.monotonic() + 30
        while stat.read_bytes().rpartition(b")")[2].split()[0] != b"Z":
            assert time.monotonic() < deadline, "the child never exited"
            await anyio.sleep(0.01)  # cross-process wait, bounded
        side_door(path, "UPDATE sessions SET writer = ?", f"{HOST}:{child.pid}:zombie")
        await (await store.open("s")).aclose()
        child.wait()
        # A live process (our parent) and a process on another host keep their leases.
        for holder in (f"{HOST}:{os.getppid()}:alive", "elsewhere:1:remote"):
            side_door(path, "UPDATE sessions SET writer = ?", holder)
            with pytest.raises(SessionBusyError) as caught:
                await store.open("s")
            assert caught.value.message == f"session 's' is open for writing by {holder}"
            assert side_door(path, "SELECT writer FROM sessions") == [(holder,)]


async def test_closing_a_session_releases_its_lease(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with open_store(f"sqlite:///{path}") as store:
        session = await store.create(session_id="s")
        ((holder,),) = side_door(path, "SELECT writer FROM sessions")
        assert isinstance(holder, str) and holder.startswith(f"{HOST}:{os.getpid()}:")
        await session.aclose()
        assert side_door(path, "SELECT writer FROM sessions") == [(None,)]


# -- reads -----------------------------------------------------------------------------------------


async def test_reads_cross_chunk_boundaries_and_can_stop_early(tmp_path: Path) -> None:
    async with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        session = await store.create(session_id="s")
        for i in range(2500):
            say(session, f"m{i}")
        await session.flush()
        seqs = [e.seq async for e in store.read("s", from_seq=500, limit=1200)]
        assert seqs == list(range(500, 1700))
        assert [e.seq async for e in store.read("s", from_seq=2000)] == list(range(2000, 2500))
        assert [e.seq async for e in store.read("s", from_seq=2500)] == []
        # A reader that stops after the first event leaves nothing behind.
        async for event in store.read("s"):
            assert event.seq == 0
            break
        assert (await store.open("s", salvage=True)).head == 2499


async def test_follow_ends_when_another_store_deletes_the_session(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    async with open_store(url) as store, open_store(url) as other:
        session = await store.create(session_id="s")
        say(session, "only")
        await session.aclose()
        seen: list[int] = []

        async def follow() -> None:
            async for event in store.follow("s"):
                seen.append(event.seq)
                await other.delete("s")  # another connection: seen through data_version

        with anyio.fail_after(30), pytest.raises(SessionNotFoundError):
            await follow()
        assert seen == [0]
