"""Approvals at their edges, narrated on the real stores: what a step holds behind a waiting call
keeps its own truth across reopening, a policy's answer the log cannot hold never lets a call
skip the person, a step resumed in another process runs only the tools its request declared,
and repair keeps the context a finished call recorded."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent import (
    APPROVAL_FAILED,
    INVALID_ARGUMENTS,
    UNKNOWN_TOOL,
    Agent,
    ApprovalConflictError,
    ApprovalError,
    Response,
    ScriptedModel,
    ToolOutput,
    tool,
)
from eventlog import Event, Session, open_store
from projections import messages
from recovery import TOOL_OUTCOME_UNKNOWN, decide, repair, scan
from recovery.testing import check_invariants
from tests.three_stores import Opener, stores

__all__ = ("stores",)  # the fixture, used by name

ROOT = Path(__file__).resolve().parent.parent


def _results(session: Session) -> dict[str, str | None]:
    """Call id -> the error code of its ``tool/result`` (``None`` for a success)."""
    found: dict[str, str | None] = {}
    for event in session.window():
        if event.type == "tool/result":
            call_id = event.data.message.tool_results[0].call_id
            found[call_id] = event.data.error.code if event.data.error else None
    return found


def _approved(events: list[Event]) -> set[str]:
    return {
        e.data.call_id for e in events if e.type == "tool/approval" and e.data.decision == "approve"
    }


async def _run(agent: Agent) -> list[str]:
    with anyio.fail_after(30):
        return [o.reason for o in await agent.run_until_idle()]


@pytest.mark.anyio
async def test_calls_that_cannot_run_behind_a_waiting_call_keep_their_own_errors(
    stores: Opener,
) -> None:
    ran: list[str] = []

    @tool(approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return f"deleted {path}"

    # The model asks to delete a file, calls a tool that does not exist, and sends arguments
    # that are not JSON. Only the first needs a person; the other two cannot run at all.
    calls = [("delete", '{"path": "a"}'), ("nosuch", "{}"), ("delete", "not json")]
    model = ScriptedModel([Response(tool_calls=calls), Response(text="done")])
    async with stores() as store:
        agent = Agent(await store.create(session_id="s"), model, [delete])
        agent.followup("go")
        assert await _run(agent) == ["awaiting approval"]
        await agent.session.aclose()

    # The agent's process goes away while the person thinks; the answers it gave the two
    # calls that could not run were durable, so the resumed agent gives the same ones: they
    # never ran, and nothing says they may have.
    async with stores() as store:
        resumed = await Agent.resume(store, "s", model, [delete])
        (pending,) = await resumed.pending_approvals()
        await resumed.approve(pending.call_id, by="ana")
        assert await _run(resumed) == ["completed"]
        assert ran == ["a"]
        assert _results(resumed.session) == {
            "call-1-0": None,
            "call-1-1": UNKNOWN_TOOL,
            "call-1-2": INVALID_ARGUMENTS,
        }
        assert TOOL_OUTCOME_UNKNOWN not in _results(resumed.session).values()
        check_invariants(resumed.session)
        await resumed.session.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("bad", ["huge", "surrogate"])
async def test_a_policy_reason_the_log_cannot_hold_never_lets_a_call_skip_the_person(
    tmp_path: Path, bad: str
) -> None:
    ran: list[str] = []
    reasons = {"huge": "x" * (9 * 1024 * 1024), "surrogate": "over \ud800 the limit"}

    def policy(args: Any) -> bool | str:
        # The first call needs a decision; the second's reason is what the log cannot hold
        # as it is (over the event size limit, or a string with no UTF-8 form).
        return reasons[bad] if args.path == "b" else True

    @tool(approval=policy, safe=True)
    def delete(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return f"deleted {path}"

    url = f"sqlite:///{tmp_path / 'policy.db'}"
    calls = [("delete", '{"path": "a"}'), ("delete", '{"path": "b"}')]
    model = ScriptedModel([Response(tool_calls=calls), Response(text="done")])
    async with open_store(url) as store:
        agent = Agent(await store.create(session_id="s"), model, [delete])
        agent.followup("delete a and b")
        outcomes = await _run(agent)
        session = agent.session
        if bad == "huge":
            # A long reason is recorded clipped: both calls wait for the person.
            assert outcomes == ["awaiting approval"]
            _first, second = await agent.pending_approvals()
            assert second.reason.startswith("xxx") and len(second.reason) <= 4000
        else:
            # A reason with no UTF-8 form is a policy that failed: no call ran, each is
            # answered APPROVAL_FAILED naming the call and the step, the turn ends error.
            assert outcomes == ["error"]
            assert set(_results(session).values()) == {APPROVAL_FAILED}
            texts = [
                str(e.data.message.tool_results[0].content)
                for e in session.window()
                if e.type == "tool/result"
            ]
            assert "'call-1-1'" in texts[0] and "step 1" in texts[0]
            assert not any(e.type == "tool/approval-request" for e in session.window())
        await session.aclose()

    # Whatever was asked, the person approves every call that waits; a call nobody approved
    # must never run.
    async with open_store(url) as store:
        resumed = await Agent.resume(store, "s", model, [delete])
        for pending in await resumed.pending_approvals():
            await resumed.approve(pending.call_id, by="ana")
        await _run(resumed)
        events = list(await resumed.session.events())
        approved = _approved(events)
        ran_ids = {f"call-1-{'ab'.index(path)}" for path in ran}
        assert ran_ids <= approved, f"ran {ran} with only {sorted(approved)} approved"
        check_invariants(resumed.session)
        await resumed.session.aclose()


def test_a_step_resumed_in_another_process_runs_only_the_tools_its_request_declared(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'plan.db'}"
    marker = tmp_path / "began"
    # A child plans its step with two of its three tools, asks for a decision on one call, and
    # is SIGKILLed inside the body of another, before it looks at the third call: one for the
    # tool the plan left out.
    argv = [sys.executable, "-m", "tests.agent_children.plan_child", url, "s", str(marker)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert marker.read_text() == "check\n"

    async def resume_and_approve() -> dict[str, str | None]:
        def body(name: str) -> Any:
            def run() -> str:
                with marker.open("a") as out:
                    out.write(f"{name}\n")
                return f"{name} done"

            run.__name__ = name
            run.__doc__ = name
            return run

        # Another process, with every tool of the agent and no hook: the plan is gone with
        # the process that made it, but the request it declared is in the log.
        async with open_store(url) as store:
            model = ScriptedModel([Response(text="done")])
            tools = [tool(approval=True)(body("delete")), body("check"), body("secret")]
            agent = await Agent.resume(store, "s", model, tools)
            async with agent.session as session:
                assert [p.call_id for p in await agent.pending_approvals()] == ["d1"]
                await agent.approve("d1", by="ana")
                assert await _run(agent) == ["completed"]
                check_invariants(session)
                return _results(session)

    results = anyio.run(resume_and_approve)
    # The approved call ran; the killed one may have run; the undeclared one never ran.
    assert marker.read_text().split() == ["check", "delete"]
    assert results == {"d1": None, "c1": TOOL_OUTCOME_UNKNOWN, "s1": UNKNOWN_TOOL}


@pytest.mark.anyio
async def test_repair_keeps_the_context_a_finished_call_recorded(stores: Opener) -> None:
    began = anyio.Event()

    @tool(approval=True)
    async def delete(path: str) -> str:
        """Delete a file (this one hangs until its run is cut)."""
        began.set()
        await anyio.sleep_forever()
        return f"deleted {path}"

    @tool
    def note() -> ToolOutput:
        """Take a note."""
        return ToolOutput(content="noted", context="the file is shared with the team")

    calls = [("delete", '{"path": "a"}'), ("note", "{}")]
    async with stores() as store:
        model = ScriptedModel([Response(tool_calls=calls)])
        agent = Agent(await store.create(session_id="s"), model, [delete, note])
        agent.followup("delete a, take a note")
        # The note ran while the deletion waits: its result and its context are durable.
        assert await _run(agent) == ["awaiting approval"]
        await agent.session.aclose()

        # Someone approves the deletion: the step waits for its agent, nothing to repair (an
        # answer now would tell the model the approved call never started).
        session = await store.open("s")
        await decide(session, "call-1-0", "approve", by="ops")
        assert scan(session).awaiting_agent and not scan(session).needs_repair
        assert not (await repair(session)).repaired
        await session.aclose()

        # The agent comes back and its run is cut inside the approved body, as a crash would
        # cut it: the deletion may have run, the step needs repair.
        agent = await Agent.resume(store, "s", ScriptedModel([]), [delete, note])
        async with anyio.create_task_group() as group:
            group.start_soon(agent.run_until_idle)
            await began.wait()
            group.cancel_scope.cancel()
        await agent.session.aclose()

        # An operator closes the session with repair (`eventlog recover --apply`): the note's
        # context is not lost.
        session = await store.open("s")
        assert scan(session).needs_repair and not scan(session).awaiting_agent
        assert (await repair(session)).repaired
        assert _results(session) == {"call-1-0": TOOL_OUTCOME_UNKNOWN, "call-1-1": None}
        texts = [m.text for m in messages(session)]
        assert texts[-1] == "the file is shared with the team"
        check_invariants(session)
        await session.aclose()


@pytest.mark.anyio
async def test_a_decision_made_while_the_step_runs_its_other_calls_lets_the_turn_go_on(
    stores: Opener,
) -> None:
    ran: list[str] = []
    agent: Agent | None = None

    @tool(approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        ran.append(f"delete {path}")
        return f"deleted {path}"

    @tool
    async def backup(path: str) -> str:
        """Back a file up (needs no decision), which takes a while."""
        # While it runs, the person (watching the pending list) approves the deletion.
        assert agent is not None
        (pending,) = await agent.pending_approvals()
        await agent.approve(pending.call_id, by="ana", reason="backed up")
        ran.append(f"backup {path}")
        return f"backed up {path}"

    calls = [("delete", '{"path": "a"}'), ("backup", '{"path": "a"}')]
    model = ScriptedModel([Response(tool_calls=calls), Response(text="done")])
    async with stores() as store:
        agent = Agent(await store.create(session_id="s"), model, [delete, backup])
        agent.followup("back a up, then delete it")
        # Nothing waits once the step's calls are through: the turn does not stop to wait for
        # a decision that is already made, and says nothing waits when nothing does.
        assert await _run(agent) == ["completed"]
        assert ran == ["backup a", "delete a"]
        assert await agent.pending_approvals() == ()
        assert _results(agent.session) == {"call-1-0": None, "call-1-1": None}
        check_invariants(agent.session)
        await agent.session.aclose()


@pytest.mark.anyio
async def test_a_retried_decision_after_the_agent_went_on_is_answered_by_the_first(
    stores: Opener,
) -> None:
    @tool(approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"

    model = ScriptedModel([Response(tool_calls=[("delete", '{"path": "a"}')]), Response(text="ok")])
    async with stores() as store:
        agent = Agent(await store.create(session_id="s"), model, [delete])
        agent.followup("delete a")
        assert await _run(agent) == ["awaiting approval"]
        (pending,) = await agent.pending_approvals()
        first = await agent.approve(pending.call_id, by="ana")
        # The agent goes on at once (it serves), and the turn ends.
        assert await _run(agent) == ["completed"]
        await agent.session.aclose()

    # The person's click is retried (a reload, a timeout): it gets the first decision back,
    # and nothing is written; the other decision is refused naming the first and its seq.
    async with stores() as store:
        session = await store.open("s")
        head = session.head
        again = await decide(session, pending.call_id, "approve", by="ana")
        assert again == first
        with pytest.raises(ApprovalConflictError) as refused:
            await decide(session, pending.call_id, "deny", by="bob", reason="too late")
        assert (refused.value.first, refused.value.seq) == ("approve", first.seq)
        assert f"seq {first.seq}" in str(refused.value)
        assert session.head == head
        # A call of an ended turn that was never decided is still refused.
        with pytest.raises(ApprovalError, match="unknown call id"):
            await decide(session, "call-9-9", "approve", by="ana")
        await session.aclose()
