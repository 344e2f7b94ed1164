"""SQLite across real processes: SIGKILL after flush, racing writers, eight writers in one file,
follow across processes, and a disk that fails under the store.

Children live in ``tests/sqlite_children/`` and report facts as lines on stdout.
"""

from __future__ import annotations

import json
import random
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from eventlog import APPEND, Message, TurnEnd, TurnStart, UserMessage, open_store
from tests.conftest import SOAK

CHILDREN = Path(__file__).parent / "sqlite_children"
pytestmark = pytest.mark.anyio


def spawn(script: str, *args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(CHILDREN / script), *map(str, args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def read_line(child: subprocess.Popen[str]) -> str:
    assert child.stdout is not None
    line = child.stdout.readline()
    if not line:
        child.wait()
        assert child.stderr is not None
        raise AssertionError(f"child exited ({child.returncode}): {child.stderr.read()}")
    return line.strip()


@pytest.mark.parametrize("durability", ["power-loss", "process-crash"])
async def test_a_flush_reported_before_sigkill_is_never_lost(
    tmp_path: Path, durability: str
) -> None:
    path = tmp_path / "s.db"
    rng = random.Random(7)
    for _ in range(20 if SOAK else 3):
        # A child appends and flushes turns; it is killed after a random number of flushes.
        child = spawn("writer.py", path, "s", "forever", durability)
        reported = -1
        for _ in range(rng.randint(1, 6)):
            reported = int(read_line(child).removeprefix("flushed "))
        child.send_signal(signal.SIGKILL)
        child.communicate()
        # This process reads everything the dead one reported, and takes over its lease.
        async with open_store(f"sqlite:///{path}") as store:
            session = await store.open("s")
            assert session.head >= reported
            assert (session.head + 1) % 5 == 0  # each turn was one transaction


async def test_two_processes_opening_one_session_exactly_one_wins(tmp_path: Path) -> None:
    path, go = tmp_path / "s.db", tmp_path / "go"
    async with open_store(f"sqlite:///{path}") as store:
        await (await store.create(session_id="s")).aclose()
    children = [spawn("writer.py", path, "s", "race", go) for _ in range(2)]
    go.touch()
    answers = [read_line(child) for child in children]
    assert sorted(answers) == ["busy", "won"]
    winner = children[answers.index("won")]
    assert read_line(winner) == "flushed 4"
    for child in children:
        child.communicate()  # closes stdin: the winner closes its session and exits
        assert child.returncode == 0
    async with open_store(f"sqlite:///{path}") as store:
        assert [e.seq async for e in store.read("s")] == [0, 1, 2, 3, 4]


async def test_a_stale_writer_in_another_process_gets_a_conflict(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with open_store(f"sqlite:///{path}") as store:
        session = await store.create(session_id="s")
        session.append("turn/start", TurnStart(turn=1))
        await session.aclose()
        # The child opens the session and stops; its lease is lost (as after an expiry).
        child = spawn("writer.py", path, "s", "stale")
        assert read_line(child) == "opened"
        with sqlite3.connect(path) as db:
            db.execute("UPDATE sessions SET writer = NULL")
        db.close()
        # This process takes the session and moves the stored log on.
        winner = await store.open("s")
        winner.append("turn/end", TurnEnd(turn=1, reason="completed"))
        await winner.flush()
        # The child, still behind at head 0, is refused and writes nothing.
        out, err = child.communicate("go\n")
        assert child.returncode == 0, err
        assert out.strip() == (
            "conflict session 's', seq 1: another writer advanced the stored log past seq 0; "
            "this session is fenced"
        )
        assert [e.type async for e in store.read("s")] == ["turn/start", "turn/end"]


async def test_eight_processes_write_eight_sessions_into_one_file(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with open_store(f"sqlite:///{path}"):
        pass  # the schema exists before the writers start
    seconds = 10
    children = [spawn("writer.py", path, f"w{i}", "load", seconds) for i in range(8)]
    heads = {}
    for i, child in enumerate(children):
        out, err = child.communicate()
        # No "database is locked" (or anything else) escapes to a caller.
        assert child.returncode == 0, err
        assert "locked" not in err
        heads[f"w{i}"] = int(out.strip().removeprefix("done "))
    async with open_store(f"sqlite:///{path}") as store:
        for session_id, head in heads.items():
            session = await store.open(session_id)  # verifies the whole hash chain
            assert session.head == head >= 4


async def test_follow_sees_another_process_write_without_gap_or_duplicate(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    async with open_store(f"sqlite:///{path}") as store:
        session = await store.create(session_id="s")
        # One event before the child's turns (a turn/start here would leave turn 1 open under
        # the child's turn 2: an ill-formed log, refused at commit now).
        session.append("user/message", UserMessage(message=Message.user("hi")), surface=APPEND)
        await session.aclose()
        seen: list[int] = []
        child = spawn("writer.py", path, "s", "turns", 8)
        try:
            with anyio.fail_after(60):
                async for event in store.follow("s"):
                    seen.append(event.seq)
                    if event.seq == 40:
                        break
        finally:
            out, err = child.communicate()
        assert child.returncode == 0, err
        assert out.strip() == "done 40"
        assert seen == list(range(41))


@pytest.mark.parametrize("inline_write_bytes", [65536, 0], ids=["on-loop", "thread"])
def test_a_failing_disk_keeps_every_commit_and_writes_it_once_after(
    tmp_path: Path, inline_write_bytes: int
) -> None:
    child = spawn("disk_full.py", tmp_path / "s.db", inline_write_bytes)
    out, err = child.communicate()
    assert child.returncode == 0, err
    report = json.loads(out)
    where = f"SQLite database {tmp_path / 's.db'}: writing events failed"
    assert [e["message"] for e in report["errors"]] == [
        f"session 's': writing seqs 5..9 failed: {where}: disk I/O error",
        f"session 's': writing seqs 5..12 failed: {where}: disk I/O error",
    ]
    # The writer's StoreWriteError chains the store's, which chains the driver's.
    assert {(e["cause"], e["driver"]) for e in report["errors"]} == {
        ("StoreWriteError", "OperationalError")
    }
    assert report["while_failing"] == {"head": 12, "durable": 4, "in_memory": list(range(13))}
    assert report["after"] == {"head": 12, "durable": 12}
    assert report["stored"] == list(range(13))
    assert report["texts"] == [f"message {i}" for i in range(13)]
