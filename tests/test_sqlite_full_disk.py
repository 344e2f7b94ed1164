"""A real full disk under the SQLite store: a small tmpfs, filled to the last byte.

Nothing committed before the disk filled is lost; a flush while it is full raises
``StoreWriteError`` and keeps the events; the first flush after space returns writes each of
them exactly once; a store closed while the disk is full releases its lease. The test mounts
the tmpfs itself (CI runs as root): if mounting is not permitted it fails, it never skips.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import anyio
import pytest

from eventlog import APPEND, Message, Session, StoreWriteError, UserMessage, open_store

pytestmark = pytest.mark.anyio

CHILDREN = Path(__file__).parent / "sqlite_children"

#: Big enough for the store's reserved WAL (4.5 MiB) and the first commits.
DISK = "24m"
#: A round larger than the reserved WAL: it must grow the WAL file, which needs free blocks.
BIG_EVENTS, BIG_TEXT = 6, 1_000_000


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A fresh tmpfs of :data:`DISK` bytes, unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK}", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"cannot mount a tmpfs (the test needs root): {done.stderr}"
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def fill(mount: Path) -> Path:
    """Fill the disk to the last block with a filler file; return it."""
    filler = mount / "filler"
    with filler.open("wb", buffering=0) as file:
        for size in (1 << 20, 1 << 12, 1):
            block = b"\0" * size
            while True:
                try:
                    file.write(block)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC, exc
                    break
    return filler


def say(session: Session, text: str) -> None:
    session.append("user/message", UserMessage(message=Message.user(text)), surface=APPEND)


def big(session: Session, tag: str) -> None:
    for i in range(BIG_EVENTS):
        say(session, f"{tag} {i} " + "x" * BIG_TEXT)


def tags(session: Session) -> list[str]:
    return [" ".join(e.data.message.text.split()[:2]) for e in session.window(0)]


async def test_a_full_disk_loses_nothing_and_the_retry_writes_each_event_once(disk: Path) -> None:
    url = f"sqlite:///{disk / 's.db'}"
    async with open_store(url) as store:
        session = await store.create(session_id="s")
        # Committed and flushed while there is room.
        say(session, "before 0")
        say(session, "before 1")
        await session.flush()
        # The disk fills up; a round that must grow the WAL fails, and keeps its events.
        filler = fill(disk)
        big(session, "during")
        with pytest.raises(StoreWriteError) as caught:
            await session.flush()
        assert "database or disk is full" in str(caught.value.__cause__)
        assert (session.durable, session.head) == (1, 1 + BIG_EVENTS)
        with pytest.raises(StoreWriteError):
            await session.flush()  # still full: the retry fails the same way
        # Space returns: the next flush writes the kept events, once.
        os.unlink(filler)
        await session.flush()
        assert session.durable == session.head
        await session.aclose()
    async with open_store(url) as store:
        reopened = await store.open("s")  # verifies seqs, chain and head
        expected = ["before 0", "before 1"] + [f"during {i}" for i in range(BIG_EVENTS)]
        assert tags(reopened) == expected
        await reopened.aclose()


async def test_a_store_closed_on_a_full_disk_releases_its_lease(disk: Path) -> None:
    url = f"sqlite:///{disk / 's.db'}"
    async with open_store(url) as store:
        session = await store.create(session_id="s")
        say(session, "kept")
        await session.flush()
        filler = fill(disk)
        big(session, "lost")
        with pytest.raises(StoreWriteError):
            await session.flush()
        # The store closes with the disk still full (its final write fails again).
    # The next store of this process takes the session at once, with every flushed event.
    async with open_store(url) as store:
        reopened = await store.open("s")
        assert tags(reopened) == ["kept"]
        # And it writes again once there is room.
        os.unlink(filler)
        say(reopened, "after")
        await reopened.flush()
        await reopened.aclose()
    async with open_store(url) as store:
        assert [e.data.message.text async for e in store.read("s")] == ["kept", "after"]


#: Rounds of (this many messages, of this size) that fill the 24 MiB disk with the store's own
#: files; a round that fails having written nothing to the WAL leaves no room in it for
#: releasing the lease either. Which sizes do depends on SQLite's page layout, so each is tried
#: on a fresh disk until one does (tmpfs is deterministic: the first one does, in practice).
OWN_ROUNDS = ((5, 200_000), (10, 100_000), (20, 50_000), (3, 300_000))


async def _fill_with_own_files_and_close(disk: Path, events: int, size: int) -> int:
    """Fill ``disk`` with a store's own writes to session ``s`` until a flush fails, close the
    store (its final write fails) and return the seq last flushed."""
    async with open_store(f"sqlite:///{disk / 's.db'}") as store:
        session = await store.create(session_id="s")
        say(session, "kept")
        await session.flush()
        with pytest.raises(StoreWriteError):
            while True:
                for i in range(events):
                    say(session, f"own {i} " + "x" * size)
                await session.flush()
        assert os.statvfs(disk).f_bavail == 0
        return session.durable


def _lease_holder(disk: Path) -> str | None:
    with closing(sqlite3.connect(f"file:{disk / 's.db'}?mode=ro", uri=True)) as db:
        ((writer,),) = db.execute("SELECT writer FROM sessions WHERE id = 's'").fetchall()
    return None if writer is None else str(writer)


def test_a_store_closed_on_a_disk_its_own_files_filled_lets_another_process_take_over(
    disk: Path,
) -> None:
    ballast = disk / "other-program.bin"
    for events, size in OWN_ROUNDS:
        for path in disk.iterdir():
            path.unlink()
        # Another program's file (removed later, to give space back), then the store's own
        # writes fill the disk, and the store closes with the disk still full.
        ballast.write_bytes(b"\0" * (1 << 20))
        durable = anyio.run(_fill_with_own_files_and_close, disk, events, size)
        assert {p.name for p in disk.iterdir()} == {ballast.name, "s.db", "s.db-shm", "s.db-wal"}
        # Its release failed: the lease still names this process, which lives on.
        holder = _lease_holder(disk)
        if holder is not None:
            break
    assert holder is not None, "no round left the WAL without room for the release"
    assert holder.split(":")[1] == str(os.getpid())
    # Space comes back; another process takes the session at once and writes a turn after
    # every event this store flushed.
    ballast.unlink()
    child = subprocess.run(
        [sys.executable, str(CHILDREN / "writer.py"), disk / "s.db", "s", "turns", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert child.stdout.strip() == f"done {durable + 5}", child.stdout + child.stderr
