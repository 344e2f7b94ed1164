"""Real crashes: children play generated agent runs into a SQLite file and are SIGKILLed.

After every kill the parent reopens each session the child announced, checks that every event
the child reported flushed survived (and that what survived is exactly the run's prefix),
repairs, checks every invariant, and checks that a second repair appends nothing. At the end
every session in the file, including ones a kill caught before they were announced, is
repaired and checked once more.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest

from eventlog import SessionNotFoundError, open_store
from eventlog.stores import LogStore
from recovery import TOOL_NOT_STARTED, repair
from recovery.testing import check_invariants, random_run
from tests.conftest import SOAK

KILLS = 2000 if SOAK else 200
ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Tally:
    kills: int = 0
    finished_before_kill: int = 0
    sessions: int = 0
    flushed_events: int = 0
    lost_events: int = 0
    repaired: int = 0
    classes: dict[str, int] = field(default_factory=dict)


class Zygote:
    """The forking parent of the children (see ``tests/crash_children/run_writer.py``)."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.crash_children.run_writer"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def answer(self, word: str) -> list[str]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline().split()
        assert line and line[0] == word, f"zygote said {line!r}, expected {word!r}"
        return line[1:]

    def fork(self, db: Path, progress: Path, batch: int, durability: str) -> int:
        assert self.process.stdin is not None
        self.process.stdin.write(f"go {db} {progress} {batch} {durability}\n")
        self.process.stdin.flush()
        return int(self.answer("pid")[0])

    def reap(self, pid: int) -> int:
        """Let the zygote wait for the child; its wait status."""
        assert self.process.stdin is not None
        self.process.stdin.write("reap\n")
        self.process.stdin.flush()
        pid_text, status = self.answer("exit")
        assert int(pid_text) == pid
        return int(status)

    def close(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)
        self.process.stdout.close()


@pytest.fixture
def zygote() -> Iterator[Zygote]:
    forker = Zygote()
    try:
        yield forker
    finally:
        forker.close()


def read_progress(path: Path) -> tuple[dict[str, int], dict[str, int]]:
    """Seeds of the announced runs and the last flushed seq of each."""
    seeds: dict[str, int] = {}
    flushed: dict[str, int] = {}
    if not path.exists():
        return seeds, flushed
    for line in path.read_text().splitlines():
        word, session_id, number = line.split()
        if word == "run":
            seeds[session_id] = int(number)
        else:
            flushed[session_id] = max(flushed.get(session_id, -1), int(number))
    return seeds, flushed


def wait_for_flushes(path: Path, count: int, pid: int) -> None:
    """Poll (bounded) until the child reported ``count`` flushes or has ended."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        if text.count("flushed") >= count:
            return
        if _ended(pid):
            return
        time.sleep(0.0005)
    raise AssertionError(f"child {pid} reported fewer than {count} flushes in 30 s")


def _ended(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().split(b") ", 1)[1][:1] == b"Z"
    except FileNotFoundError:
        return True


async def verify(
    store: LogStore, session_id: str, seed: int | None, flushed: int, tally: Tally
) -> None:
    try:
        session = await store.open(session_id)
    except SessionNotFoundError:
        assert seed is None and flushed < 0, f"announced session {session_id} is missing"
        return
    async with session:
        tally.sessions += 1
        lost = max(0, flushed - session.head)
        tally.lost_events += lost
        tally.flushed_events += flushed + 1
        assert not lost, f"{session_id}: flushed up to seq {flushed}, stored {session.head}"
        if seed is not None:
            run = random_run(seed)
            planned = [(e.type, e.data, e.surface, e.sources) for e in run.events]
            # Read from the store where the session was opened from a snapshot.
            kept = [(e.type, e.data, e.surface, e.sources) async for e in session.read_events()]
            assert kept == planned[: len(kept)], f"{session_id}: stored log is not the run"
        report = await repair(session)
        if seed is not None:
            # A body may run once its tool/call is flushed: it is never "not started".
            may_have_run = {
                e.data.call_id for e in run.events[: flushed + 1] if e.type == "tool/call"
            }
            for seq in report.appended:
                data = (await session.events())[seq].data
                if getattr(data, "error", None) is not None and data.error.code == TOOL_NOT_STARTED:
                    call_id = data.message.content[0].call_id
                    assert call_id not in may_have_run, f"{session_id}: {call_id} may have run"
        tally.repaired += bool(report.appended)
        for dangling in report.diagnosis.dangling:
            tally.classes[dangling.kind] = tally.classes.get(dangling.kind, 0) + 1
        assert (await repair(session)).appended == ()
    # The invariants read the whole log: check them on a full replay of what repair stored.
    check_invariants(await store.open(session_id, salvage=True))


async def verify_batch(db: Path, progress: Path, tally: Tally) -> None:
    seeds, flushed = read_progress(progress)
    async with open_store(f"sqlite:///{db}") as store:
        for session_id, seed in seeds.items():
            await verify(store, session_id, seed, flushed.get(session_id, -1), tally)


async def verify_all(db: Path) -> int:
    tally = Tally()
    async with open_store(f"sqlite:///{db}") as store:
        after = None
        while infos := await store.list(after=after):
            for info in infos:
                assert info.error is None, info
                await verify(store, info.id, None, -1, tally)
            after = infos[-1].id
    return tally.sessions


@pytest.mark.timeout(1800 if SOAK else 300)
def test_sigkill_at_random_moments_loses_no_flushed_event(tmp_path: Path, zygote: Zygote) -> None:
    db = tmp_path / "crash.db"
    rng = random.Random(os.environ.get("RECOVERY_CRASH_SEED", "recovery-crash"))
    tally = Tally()
    for batch in range(KILLS):
        progress = tmp_path / f"progress-{batch}"
        durability = rng.choice(("power-loss", "process-crash"))
        pid = zygote.fork(db, progress, batch, durability)
        wait_for_flushes(progress, rng.randint(0, 24), pid)
        # A random extra moment, so kills land inside writes too (not a synchronisation).
        time.sleep(rng.uniform(0, 0.003))
        os.kill(pid, signal.SIGKILL)  # not yet reaped: the pid is still our child's
        status = zygote.reap(pid)
        tally.kills += 1
        if not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL):
            assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, (
                f"child {pid} of batch {batch} failed (status {status}); see its stderr"
            )
            tally.finished_before_kill += 1
        try:
            anyio.run(verify_batch, db, progress, tally)
        except AssertionError as exc:
            raise AssertionError(f"after kill {batch}: {exc}") from exc
    total = anyio.run(verify_all, db)
    print(
        f"\nrecovery crash test: {tally.kills} kills ({tally.finished_before_kill} children "
        f"had finished), {tally.sessions} sessions checked ({total} in the final sweep), "
        f"{tally.flushed_events} flushed events checked, {tally.lost_events} lost, "
        f"{tally.repaired} repairs, dangling calls {tally.classes}"
    )
    assert tally.lost_events == 0
    assert tally.kills >= KILLS
    # The kills landed where it matters: inside turns, with calls of every class dangling.
    assert tally.repaired >= KILLS // 4, tally
    assert tally.finished_before_kill < KILLS // 10, tally
    assert set(tally.classes) == {"completed", "started", "proposed"}, tally
