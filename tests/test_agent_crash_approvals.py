"""Real SIGKILLs at every flush boundary of an approval flow, on a SQLite file.

One step proposes two calls: ``g1`` (its tool needs a decision) and ``f1`` (needs none). The flow
is lived by child processes (``tests/agent_children/approval_child.py``): *ask* (prompt, run
until the turn waits), *decide* (approve or deny), *run* (go on). Each case kills one life at one
boundary (before the request is durable, inside the free call's body, while waiting, before the
decision is durable, after it is, inside the approved body), then restarts that life and lives
the rest. After every life, killed or not, the durable log must show that:

- no call was asked about twice, and no call got two decisions;
- the guarded body never began without a durable ``approve`` (never undecided, never denied);
- no body began twice;
- a step with a durable question and no decision is ``awaiting approval`` (not needs-repair);

and at the end the turn is closed, with ``g1`` answered as its fate says: ``TOOL_DENIED`` when
denied, its result when approved and run, ``TOOL_OUTCOME_UNKNOWN`` exactly when its body was
killed, ``TOOL_NOT_STARTED`` only when the question never became durable.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from eventlog import Event, open_store
from recovery import TOOL_DENIED, TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN, scan
from recovery.testing import check_invariants

ROOT = Path(__file__).resolve().parent.parent

#: Kill point -> the life it belongs to.
POINTS = {
    "request": "ask",
    "free-body": "ask",
    "waiting": "ask",
    "decision": "decide",
    "decided": "decide",
    "guarded-body": "run",
}


def _life(url: str, life: str, kill: str, decision: str, marker: Path) -> bool:
    """Live one life in a child process; True when it was SIGKILLed."""
    argv = [sys.executable, "-m", "tests.agent_children.approval_child"]
    argv += [url, "s", life, kill, decision, str(marker)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    if done.returncode == -signal.SIGKILL:
        return True
    assert done.returncode == 0, f"{life} (kill {kill}) failed:\n{done.stderr}"
    return False


def _began(marker: Path) -> list[str]:
    return marker.read_text().split("\n")[:-1] if marker.exists() else []


async def _durable(url: str) -> list[Event]:
    async with open_store(url) as store:
        session = await store.open("s")
        try:
            view = scan(session)
            if not view.needs_repair:  # settled (a waiting step is): every invariant holds
                check_invariants(session)
            events = list(await session.events())
            asked = [e for e in events if e.type == "tool/approval-request"]
            decided = [e for e in events if e.type == "tool/approval"]
            if asked and not decided and view.open_turn is not None:
                # Waiting, not broken: the question stands and nothing needs repair.
                assert [c.call_id for c in view.awaiting_approval] == ["g1"]
                assert not view.needs_repair
            return events
        finally:
            await session.aclose()


def _check(events: list[Event], began: list[str]) -> None:
    asked = [e.data.call_id for e in events if e.type == "tool/approval-request"]
    decided = [e.data for e in events if e.type == "tool/approval"]
    assert asked in ([], ["g1"]), f"asked {asked}"
    assert len(decided) <= 1, f"two decisions: {decided}"
    assert len(began) == len(set(began)), f"a body began twice: {began}"
    if "guarded g1" in began:
        assert decided and decided[0].decision == "approve", "the guarded body ran undecided"


def _answers(events: list[Event]) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for e in events:
        if e.type == "tool/result":
            call_id = e.data.message.tool_results[0].call_id
            found[call_id] = e.data.error.code if e.data.error else None
    return found


@pytest.mark.timeout(600)
@pytest.mark.parametrize("decision", ["approve", "deny"])
@pytest.mark.parametrize("point", list(POINTS))
def test_a_sigkill_at_each_approval_boundary(tmp_path: Path, point: str, decision: str) -> None:
    url = f"sqlite:///{tmp_path / 'flow.db'}"
    marker = tmp_path / "began"
    killed = False
    for life in ("ask", "decide", "run"):
        kill = point if POINTS[point] == life else "none"
        if _life(url, life, kill, decision, marker):
            killed = True
            _check(anyio.run(_durable, url), _began(marker))
            assert not _life(url, life, "none", decision, marker), "the restart was killed"
        _check(anyio.run(_durable, url), _began(marker))
    # The kill landed wherever the flow passes (a denied body never begins).
    assert killed or (point == "guarded-body" and decision == "deny")

    events = anyio.run(_durable, url)
    answers = _answers(events)
    assert events[-1].type == "turn/end"
    asked = any(e.type == "tool/approval-request" for e in events)
    if not asked:
        # Killed before the question was durable: repair closed the turn (answering the
        # calls not started, if the reply proposing them was durable); nothing ran.
        assert point == "request" and _began(marker) == []
        assert set(answers.values()) <= {TOOL_NOT_STARTED}
        return
    assert set(answers) == {"g1", "f1"}
    if decision == "deny":
        assert answers["g1"] == TOOL_DENIED and "guarded g1" not in _began(marker)
    elif point == "guarded-body":
        assert answers["g1"] == TOOL_OUTCOME_UNKNOWN and _began(marker).count("guarded g1") == 1
    else:
        assert answers["g1"] is None and _began(marker).count("guarded g1") == 1
    # The free call: unknown exactly when its body was killed, else its own result.
    assert answers["f1"] == (TOOL_OUTCOME_UNKNOWN if point == "free-body" else None)
