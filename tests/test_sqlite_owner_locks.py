"""A SQLite writer lease is held by a store, not only by a process: a session whose release
failed (its store closed, or only the session did) lets another process take it at once, while
the holder's process, and even its store, live on; a lease still held never does
(eventlog/stores/sqlite/_liveness.py).
"""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from eventlog import SessionBusyError, open_store

pytestmark = pytest.mark.anyio

#: A child that takes session ``s``'s lease in a store, says ``held``, then on its first line
#: of stdin closes the store's connections as a crash would (no release: the lease stays) and
#: says ``closed``, and lives on until stdin ends.
_HOLDER = """
import sys, anyio
from eventlog import open_store

async def main(url):
    async with open_store(url) as store:
        await store.open("s")
        print("held", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)
        await store.simulate_crash()
    print("closed", flush=True)
    await anyio.to_thread.run_sync(sys.stdin.read)

anyio.run(main, sys.argv[1])
"""


#: A child that takes session ``s``'s lease in a store whose writes wait 0.2 s for a lock,
#: says ``held``, then on its first line of stdin closes the session (its release then fails
#: if another connection holds the write lock) and says how that went, keeping its store open
#: until stdin ends.
_SESSION_CLOSER = """
import sys, anyio
from eventlog import EventLogError, open_store

async def main(url):
    async with open_store(url, busy_timeout=0.2) as store:
        session = await store.open("s")
        print("held", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)
        try:
            await session.aclose()
            print("released", flush=True)
        except EventLogError as exc:
            print("release failed:", type(exc).__name__, flush=True)
        await anyio.to_thread.run_sync(sys.stdin.read)

anyio.run(main, sys.argv[1])
"""


@pytest.fixture
def child() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        process.kill()
        process.communicate()


def _spawn(children: list[subprocess.Popen[str]], *args: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    children.append(process)
    return process


def _line(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    assert line, process.stderr.read() if process.stderr else ""
    return line


def _holder(path: Path) -> str | None:
    with closing(sqlite3.connect(path)) as db:
        ((writer,),) = db.execute("SELECT writer FROM sessions WHERE id = 's'").fetchall()
    return None if writer is None else str(writer)


def _set_holder(path: Path, token: str) -> None:
    with closing(sqlite3.connect(path)) as db:
        db.execute("UPDATE sessions SET writer = ? WHERE id = 's'", (token,))
        db.commit()


async def _holding(
    children: list[subprocess.Popen[str]], path: Path, script: str
) -> subprocess.Popen[str]:
    """Session ``s`` created at ``path``, then held by a child running ``script``."""
    async with open_store(f"sqlite:///{path}") as store:
        session = await store.create(session_id="s")
        await session.aclose()
    holder = _spawn(children, "-c", script, f"sqlite:///{path}")
    assert _line(holder) == "held"
    return holder


def _tell(process: subprocess.Popen[str], line: str) -> None:
    assert process.stdin is not None
    process.stdin.write(line + "\n")
    process.stdin.flush()


async def _takes_over(path: Path) -> None:
    """This process opens session ``s`` for writing, at once."""
    async with open_store(f"sqlite:///{path}") as store:
        session = await store.open("s")
        await session.aclose()


def _still_named(path: Path, holder: subprocess.Popen[str]) -> None:
    """The lease still names ``holder``, which still runs."""
    token = _holder(path)
    assert token is not None and token.split(":")[1] == str(holder.pid)
    assert holder.poll() is None


async def test_a_store_closed_without_releasing_frees_the_session_while_its_process_lives(
    tmp_path: Path, child: list[subprocess.Popen[str]]
) -> None:
    path = tmp_path / "s.db"
    holder = await _holding(child, path, _HOLDER)
    # Open in the other process: busy.
    with pytest.raises(SessionBusyError):
        await _takes_over(path)
    # It closes its store without releasing (the lease still names it) and lives on.
    _tell(holder, "close")
    assert _line(holder) == "closed"
    _still_named(path, holder)
    # This process takes the session at once.
    await _takes_over(path)


async def test_an_unmarked_lease_of_a_live_process_is_still_its_process_alone(
    tmp_path: Path, child: list[subprocess.Popen[str]]
) -> None:
    # A token written by an earlier version (no owner lock, no mark) of a live process: busy,
    # as before; the same token marked, with no lock held: taken over.
    path = tmp_path / "s.db"
    async with open_store(f"sqlite:///{path}") as store:
        await (await store.create(session_id="s")).aclose()
    sleeper = _spawn(child, "-c", "import sys; sys.stdin.read()")
    token = f"{socket.gethostname()}:{sleeper.pid}:0123456789ab"
    _set_holder(path, token)
    async with open_store(f"sqlite:///{path}") as store:
        with pytest.raises(SessionBusyError, match=token):
            await store.open("s")
    _set_holder(path, token + ":ofd")
    await _takes_over(path)


async def test_a_session_whose_release_failed_is_free_while_its_store_stays_open(
    tmp_path: Path, child: list[subprocess.Popen[str]]
) -> None:
    path = tmp_path / "s.db"
    holder = await _holding(child, path, _SESSION_CLOSER)
    # Another connection holds the write lock while the holder closes the session: its
    # release cannot be written.
    with closing(sqlite3.connect(path, isolation_level=None)) as blocker:
        blocker.execute("BEGIN IMMEDIATE")
        _tell(holder, "close")
        assert _line(holder) == "release failed: StoreWriteError"
        blocker.execute("ROLLBACK")
    # The lease still names the holder, whose store is still open.
    _still_named(path, holder)
    # The session is free all the same: this process takes it at once.
    await _takes_over(path)
