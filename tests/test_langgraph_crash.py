"""A real LangGraph ``StateGraph`` with a tool node on ``EventlogSaver``, its process SIGKILLed
at every flush boundary in turn, the thread reopened and finished in a new process.

For each boundary (the start and the return of every ``aput``/``aput_writes``, see
``tests/langgraph_children/graph_run.py``) a child runs the graph on a fresh SQLite file and
kills itself there; a second child reopens what is left and reports. The test checks:

- nothing reported durable is lost (every call that returned is on record);
- the surviving checkpoints are a prefix of the uninterrupted run's, and every checkpoint that
  has a durable child holds all the writes the uninterrupted run's checkpoint of that step
  held: never a later checkpoint durable with an earlier write missing;
- ``eventlog verify --all`` and ``eventlog audit`` exit 0 on what remains;
- with LangGraph's ``durability="sync"``, resuming finishes the thread in the uninterrupted
  run's final state, and a tool whose result was durable never runs again.

With ``durability="async"`` LangGraph hands ``aput`` a shallow copy of the checkpoint and calls
it only after the previous put returned, while the next super-step already runs: a channel whose
stored value is a live object (the ``join`` barrier's set) is serialised as it is by then, not as
it was at the checkpoint. LangGraph's own ``AsyncSqliteSaver`` stores the same later state
(``model`` shows as a pending task of the step-3 checkpoint of an uninterrupted run), and a
thread resumed from such a checkpoint can stop short. The durability checks above hold in both
modes; the final-state check is made where LangGraph's checkpoints are exact (``sync``).
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


class Zygote:
    """``tests.langgraph_children.graph_run``: forks one child per command."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.langgraph_children.graph_run"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def command(self, *words: object) -> int:
        """Run one child to its end; its wait status."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(" ".join(map(str, words)) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline().split()
        assert answer[:1] == ["exit"], f"the zygote died: {answer}"
        return int(answer[1])

    def close(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        assert self.process.wait(timeout=60) == 0
        self.process.stdout.close()


@pytest.fixture(scope="module")
def zygote() -> Iterator[Zygote]:
    process = Zygote()
    yield process
    process.close()


def _run_and_check(
    zygote: Zygote, tmp: Path, name: str, kill_at: int, durability: str
) -> tuple[int, list[str], dict[str, Any]]:
    db, progress, report = tmp / f"{name}.db", tmp / f"{name}.progress", tmp / f"{name}.json"
    status = zygote.command("run", db, progress, kill_at, durability)
    assert zygote.command("check", db, progress, report) == 0, f"{name}: the check failed"
    lines = progress.read_text().splitlines() if progress.exists() else []
    return status, lines, json.loads(report.read_text())


def _channels(checkpoint: dict[str, Any]) -> Counter[str]:
    """The channels a checkpoint's pending writes go to (task ids differ from run to run)."""
    return Counter(channel for _task, channel in checkpoint["writes"])


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_a_kill_at_any_flush_boundary_loses_nothing_and_resumes(
    zygote: Zygote, tmp_path: Path, durability: str
) -> None:
    # The uninterrupted run: its boundaries, checkpoints and final state are the reference.
    status, lines, reference = _run_and_check(zygote, tmp_path, "ref", 0, durability)
    assert status == 0
    boundaries = int(lines[-1].removeprefix("boundaries "))
    assert boundaries >= 30  # a put and a write per super-step, two sides each
    steps = [c["step"] for c in reference["checkpoints"]]
    assert steps == list(range(-1, len(steps) - 1))
    by_step = {c["step"]: _channels(c) for c in reference["checkpoints"]}

    for kill_at in range(1, boundaries + 1):
        name = f"kill{kill_at}"
        status, lines, report = _run_and_check(zygote, tmp_path, name, kill_at, durability)
        # The child died by SIGKILL at that boundary.
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, name

        # Nothing that was reported durable is lost.
        survivors = {c["id"] for c in report["checkpoints"]}
        logged_writes = {tuple(pair) for pair in report["logged_writes"]}
        for line in lines:
            kind, checkpoint_id, *task = line.removeprefix("returned ").split()
            if kind == "put":
                assert checkpoint_id in survivors, f"{name}: {line} was lost"
            else:
                assert (checkpoint_id, task[0]) in logged_writes, f"{name}: {line} was lost"

        # The survivors are a prefix of the reference, each linked to the one before ...
        checkpoints = report["checkpoints"]
        assert [c["step"] for c in checkpoints] == steps[: len(checkpoints)], name
        for parent, child in itertools.pairwise(checkpoints):
            assert child["parent"] == parent["id"], name
            # ... and a checkpoint with a durable successor has every write it had then.
            assert _channels(parent) == by_step[parent["step"]], f"{name}: writes missing"
        if checkpoints:
            latest = checkpoints[-1]
            assert not _channels(latest) - by_step[latest["step"]], name

        # The eventlog command reads what remains.
        assert report["verify"] == 0, name
        assert report.get("audit") == (0 if report["session_exists"] else None), name
        assert report["session_exists"] or not checkpoints, name

        if durability == "sync":
            # Resumed in a new process, the thread ends as the uninterrupted run did ...
            assert report["final"] == reference["final"], name
            runs = Counter(report["runs"])
            assert set(runs) == set(reference["runs"]), name
            # ... and a tool whose result was durable before the kill never runs again.
            for key in report["durable_tool_keys"]:
                assert runs[key] == 1, f"{name}: {key} ran {runs[key]} times"
