"""A hook is never asked the same decision twice: a child process records a hook's decision,
is killed with SIGKILL once the decision is durable, and the resumed agent finds it in the log
and never asks again (the interrupted turn is closed by repair, nothing is left to decide)."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from agent import Agent, Response, ScriptedModel, StepContext
from eventlog import open_store
from recovery.testing import check_invariants
from tests.agent_children.support import kill_once_it_says

ROOT = Path(__file__).resolve().parent.parent


def _kill_after_the_decision(url: str, marker: Path, mode: str) -> None:
    """Run the child until its model is called (the decision is durable by then), SIGKILL it."""
    command = [sys.executable, "-m", "tests.agent_children.hook_child", url, "s", str(marker)]
    kill_once_it_says([*command, mode], "requested", cwd=ROOT)  # the model is called


async def _resume(url: str, marker: Path, mode: str) -> tuple[list[str], list[tuple[str, str]]]:
    """Resume with the same hook (still counting), run until idle, then run one more turn;
    return the outcomes and the recorded (hook, outcome) decisions."""

    def hook(ctx: StepContext) -> bool | None:
        with marker.open("a") as out:
            out.write(f"{mode} {ctx.turn} {ctx.step}\n")
        return None if mode == "before_step" else False

    model = ScriptedModel([Response(text="a new turn")])
    async with open_store(url) as store:
        agent = await Agent.resume(store, "s", model, **{mode: hook})  # type: ignore[arg-type]
        async with agent.session as session:
            # The killed turn was closed by repair; nothing wakes the agent, nothing is asked.
            assert agent.repair_report is not None and agent.repair_report.appended
            outcomes: list[str] = [o.reason for o in await agent.run_until_idle()]
            # A new input is a new turn: its decisions are new ones.
            agent.followup("again")
            outcomes += [o.reason for o in await agent.run_until_idle()]
            check_invariants(session)
            decisions = [
                (f"{e.data.hook} {e.data.turn} {e.data.step}", e.data.outcome)
                for e in session.window()
                if e.type == "agent/hook"
            ]
    return outcomes, decisions


@pytest.mark.parametrize(
    ("mode", "first"),
    [
        ("before_step", ("before_step 1 1", "plan")),
        ("should_continue", ("should_continue 1 1", "continue")),
    ],
)
def test_a_decision_recorded_before_a_kill_is_never_asked_again(
    tmp_path: Path, mode: str, first: tuple[str, str]
) -> None:
    url = f"sqlite:///{tmp_path / 'hooks.db'}"
    marker = tmp_path / "asked"
    # A child records the hook's decision and is killed while acting on it.
    _kill_after_the_decision(url, marker, mode)
    assert marker.read_text().splitlines() == [first[0]]

    outcomes, decisions = anyio.run(_resume, url, marker, mode)

    # The decision was durable before the kill, and the resumed agent never asked it again:
    # the hook was called once for turn 1 step 1, then only for the new turn.
    assert outcomes == ["completed"]
    asked = marker.read_text().splitlines()
    assert asked == [first[0], f"{mode} 2 1"]
    assert decisions[0] == first
    assert [d for d, _ in decisions].count(first[0]) == 1
