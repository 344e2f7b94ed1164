"""Approvals, narrated end to end on a real SQLite file: a call that needs a person's decision is
asked for durably, waits (never repaired, never run), and goes on once decided; a denied call
never runs and the model is told why; decisions are final, refusals commit nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent import (
    APPROVAL_FAILED,
    TOOL_DENIED,
    Agent,
    ApprovalConflictError,
    ApprovalError,
    FunctionTool,
    Response,
    ScriptedModel,
    tool,
)
from eventlog import Session, Store, ValidationError, open_store
from projections import timeline
from recovery import decide, repair, scan
from recovery.testing import check_invariants
from tests.three_stores import Opener, stores

__all__ = ("stores",)  # the fixture, used by name

pytestmark = pytest.mark.anyio


class Ran:
    """Which tool bodies ran, in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []


def _tools(ran: Ran) -> list[FunctionTool]:
    @tool(approval=True, safe=True)
    def delete(path: str) -> str:
        """Delete a file."""
        ran.calls.append(f"delete {path}")
        return f"deleted {path}"

    @tool(safe=True)
    def read(path: str) -> str:
        """Read a file."""
        ran.calls.append(f"read {path}")
        return f"contents of {path}"

    async def big(args: Any) -> bool | str:  # the decoded arguments, as `safe=` gets them
        return f"amount {args.amount} is over 100" if args.amount > 100 else False

    @tool(approval=big, safe=True)
    async def pay(amount: int) -> str:
        """Pay an amount."""
        ran.calls.append(f"pay {amount}")
        return f"paid {amount}"

    return [delete, read, pay]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with open_store(f"sqlite:///{tmp_path / 'approvals.db'}") as opened:
        yield opened


def _types(session: Session) -> list[str]:
    return [e.type for e in session.window()]


def _results(session: Session) -> list[tuple[str, str | None, str]]:
    """(call id, error code, text) of every tool/result, in log order."""
    found = []
    for event in session.window():
        if event.type == "tool/result":
            part = event.data.message.tool_results[0]
            code = event.data.error.code if event.data.error else None
            found.append((part.call_id, code, event.data.message.text or str(part.content)))
    return found


async def _run(agent: Agent) -> list[str]:
    with anyio.fail_after(20):
        return [o.reason for o in await agent.run_until_idle()]


async def test_an_approved_call_waits_durably_then_runs_once(store: Store) -> None:
    ran = Ran()
    session = await store.create(session_id="approve")
    model = ScriptedModel(
        [Response(tool_calls=[("delete", '{"path": "a.txt"}')]), Response(text="Deleted.")]
    )
    agent = Agent(session, model, _tools(ran))
    agent.followup("delete a.txt")

    # The step asks, flushes, and the turn waits: nothing ran, the turn is still open.
    assert await _run(agent) == ["awaiting approval"]
    assert ran.calls == []
    (pending,) = await agent.pending_approvals()
    assert (pending.name, pending.arguments, pending.turn, pending.step) == (
        "delete",
        '{"path": "a.txt"}',
        1,
        1,
    )
    assert pending.reason == "tool 'delete' needs approval"
    assert session.durable == session.head  # the question is durable
    assert timeline(session).turn is not None

    # Waiting is not a crash: scan does not ask for repair, and repair appends nothing.
    diagnosis = scan(session)
    assert [c.call_id for c in diagnosis.awaiting_approval] == [pending.call_id]
    assert diagnosis.dangling[0].kind == "awaiting approval"
    assert not diagnosis.needs_repair and not diagnosis.clean
    head = session.head
    assert (await repair(session)).appended == ()
    assert session.head == head

    # Running again while the decision is missing does nothing.
    assert await _run(agent) == ["awaiting approval"]
    assert session.head == head

    # The decision is durable on return; the run goes on with the same step.
    record = await agent.approve(pending.call_id, by="ana", reason="ok")
    assert (record.decision, record.by, record.requested) == ("approve", "ana", pending.seq)
    assert session.durable == record.seq
    assert await _run(agent) == ["completed"]
    assert ran.calls == ["delete a.txt"]
    types = _types(session)
    request, decision, call = (
        types.index("tool/approval-request"),
        types.index("tool/approval"),
        types.index("tool/call"),
    )
    assert request < decision < call < types.index("tool/result")
    assert types.count("step/start") == 2 and types.count("turn/end") == 1
    assert scan(session).clean
    check_invariants(session)


async def test_a_denied_call_never_runs_and_the_model_is_told_why(store: Store) -> None:
    ran = Ran()
    session = await store.create(session_id="deny")
    model = ScriptedModel(
        [Response(tool_calls=[("delete", '{"path": "b.txt"}')]), Response(text="Understood.")]
    )
    agent = Agent(session, model, _tools(ran))
    agent.followup("delete b.txt")
    assert await _run(agent) == ["awaiting approval"]
    (pending,) = await agent.pending_approvals()

    await agent.deny(pending.call_id, by="bo", reason="keep b.txt")
    assert await _run(agent) == ["completed"]

    # Never ran, and never got a tool/call; the model saw TOOL_DENIED with the reason.
    assert ran.calls == []
    assert "tool/call" not in _types(session)
    ((call_id, code, text),) = _results(session)
    assert (call_id, code) == (pending.call_id, TOOL_DENIED)
    assert "keep b.txt" in text and "did not run" in text
    last = model.requests[-1].messages[-1]
    assert last.role == "tool" and "keep b.txt" in str(last.tool_results[0].content)
    check_invariants(session)


async def test_mixed_parallel_calls_run_what_needs_no_decision_and_answer_in_order(
    store: Store,
) -> None:
    ran = Ran()
    session = await store.create(session_id="mixed")
    calls = [
        ("delete", '{"path": "x"}'),
        ("read", '{"path": "y"}'),
        ("pay", '{"amount": 500}'),
        ("pay", '{"amount": 5}'),
    ]
    model = ScriptedModel([Response(tool_calls=calls), Response(text="All handled.")])
    agent = Agent(session, model, _tools(ran))
    agent.followup("do four things")

    # The two calls needing no decision run before the turn waits; their results wait
    # behind the first held call as durable tool/outcomes.
    assert await _run(agent) == ["awaiting approval"]
    assert sorted(ran.calls) == ["pay 5", "read y"]
    pending = await agent.pending_approvals()
    assert [(p.name, p.reason) for p in pending] == [
        ("delete", "tool 'delete' needs approval"),
        ("pay", "amount 500 is over 100"),
    ]
    assert _types(session).count("tool/outcome") == 2 and "tool/result" not in _types(session)

    # One decision is not enough: the step still waits.
    await agent.approve(pending[0].call_id, by="ana")
    assert await _run(agent) == ["awaiting approval"]
    await agent.deny(pending[1].call_id, by="ana", reason="too much")
    assert await _run(agent) == ["completed"]

    # Each body ran once; results are in the model's order.
    assert sorted(ran.calls) == ["delete x", "pay 5", "read y"]
    results = _results(session)
    proposing = session.window()[_first(session, "assistant/message")]
    ids = [part.id for part in proposing.data.message.tool_calls]
    assert [r[0] for r in results] == ids
    assert [r[1] for r in results] == [None, None, TOOL_DENIED, None]
    check_invariants(session)


def _first(session: Session, type_: str) -> int:
    return next(e.seq for e in session.window() if e.type == type_)


async def test_a_decision_from_another_store_handle_after_the_agent_closed(
    store: Store, tmp_path: Path
) -> None:
    ran = Ran()
    session = await store.create(session_id="elsewhere")
    model = ScriptedModel(
        [Response(tool_calls=[("delete", '{"path": "c"}')]), Response(text="Done.")]
    )
    agent = Agent(session, model, _tools(ran))
    agent.followup("delete c")
    assert await _run(agent) == ["awaiting approval"]
    (pending,) = await agent.pending_approvals()
    await session.aclose()

    # Someone else opens the store, resumes the session (nothing repaired), and approves.
    async with open_store(f"sqlite:///{tmp_path / 'approvals.db'}") as other:
        resumed = await Agent.resume(other, "elsewhere", ScriptedModel([]), _tools(Ran()))
        assert resumed.repair_report is not None and not resumed.repair_report.repaired
        assert [p.call_id for p in await resumed.pending_approvals()] == [pending.call_id]
        await resumed.approve(pending.call_id, by="ops")
        await resumed.session.aclose()

    # The first process comes back: it never asks again, and runs the approved call once.
    again = await Agent.resume(store, "elsewhere", model, _tools(ran))
    assert await again.pending_approvals() == ()
    assert await _run(again) == ["completed"]
    assert ran.calls == ["delete c"]
    assert _types(again.session).count("tool/approval-request") == 1
    check_invariants(again.session)
    await again.session.aclose()


async def test_a_decision_arriving_while_the_agent_serves_lets_the_run_go_on(
    store: Store,
) -> None:
    ran = Ran()
    session = await store.create(session_id="serve")
    model = ScriptedModel(
        [Response(tool_calls=[("delete", '{"path": "d"}')]), Response(text="Done.")]
    )
    agent = Agent(session, model, _tools(ran))
    asked, ended = anyio.Event(), anyio.Event()

    def watch(event: object) -> None:
        kind = getattr(event, "type", "")
        if kind == "tool/approval-request":
            asked.set()
        elif kind == "turn/end":
            ended.set()

    session.subscribe(watch)
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            await tg.start(agent.serve)
            agent.followup("delete d")
            await asked.wait()
            assert ran.calls == []
            (pending,) = await agent.pending_approvals()
            await agent.approve(pending.call_id, by="ana")  # the agent is idle, waiting
            await ended.wait()
            tg.cancel_scope.cancel()
    assert ran.calls == ["delete d"]
    check_invariants(session)


async def test_decisions_are_final_and_refusals_commit_nothing(store: Store) -> None:
    ran = Ran()
    session = await store.create(session_id="refusals")
    model = ScriptedModel(
        [
            Response(tool_calls=[("delete", '{"path": "e"}'), ("read", '{"path": "f"}')]),
            Response(text="Done."),
        ]
    )
    agent = Agent(session, model, _tools(ran))
    agent.followup("go")
    assert await _run(agent) == ["awaiting approval"]
    (pending,) = await agent.pending_approvals()
    read_id = next(c.call_id for c in timeline(session).open_calls if c.name == "read")

    first = await agent.approve(pending.call_id, by="ana")
    head = session.head
    # The same decision again is a no-op returning the first.
    assert await agent.approve(pending.call_id, by="someone else") == first
    # The other decision is refused, naming the first and its seq.
    conflict = rf"already decided 'approve' at seq {first.seq}"
    with pytest.raises(ApprovalConflictError, match=conflict) as info:
        await agent.deny(pending.call_id, by="bo")
    assert (info.value.first, info.value.seq) == ("approve", first.seq)
    # A call needing none, an unknown call, bad arguments: refused.
    with pytest.raises(ApprovalError, match="needs no decision"):
        await agent.approve(read_id, by="ana")
    with pytest.raises(ApprovalError, match="unknown call id"):
        await agent.approve("nope", by="ana")
    with pytest.raises(ValidationError, match="non-empty string"):
        await agent.approve(pending.call_id, by="")
    assert session.head == head

    # Once the turn ended, its calls take no new decision: the other one is still refused
    # naming the first, and the same one again still returns it.
    assert await _run(agent) == ["completed"]
    head = session.head
    with pytest.raises(ApprovalConflictError, match=conflict):
        await agent.deny(pending.call_id, by="bo")
    assert await agent.approve(pending.call_id, by="ana") == first
    assert session.head == head


async def test_an_approval_predicate_that_raises_ends_the_turn_error(store: Store) -> None:
    ran = Ran()

    def broken(args: object) -> bool:
        raise RuntimeError("policy service down")

    @tool(approval=broken)
    def wire(amount: int) -> str:
        """Wire money."""
        ran.calls.append("wire")
        return "wired"

    session = await store.create(session_id="broken")
    model = ScriptedModel([Response(tool_calls=[("wire", '{"amount": 1}')])])
    agent = Agent(session, model, [wire])
    agent.followup("wire 1")
    assert await _run(agent) == ["error"]
    assert ran.calls == []
    ((_call_id, code, text),) = _results(session)
    assert code == APPROVAL_FAILED
    assert "turn 1, step 1" in text and "RuntimeError: policy service down" in text
    assert "tool/approval-request" not in _types(session)
    assert scan(session).clean
    check_invariants(session)


async def test_on_every_store_a_decision_from_another_handle_lets_the_run_go_on(
    stores: Opener,
) -> None:
    ran = Ran()
    model = ScriptedModel(
        [
            Response(tool_calls=[("delete", '{"path": "p"}'), ("read", '{"path": "q"}')]),
            Response(text="Done."),
        ]
    )
    # The agent asks and waits; its process goes away (the store closed).
    async with stores() as store:
        agent = Agent(await store.create(session_id="every"), model, _tools(ran))
        agent.followup("delete p, read q")
        assert await _run(agent) == ["awaiting approval"]
        (pending,) = await agent.pending_approvals()
        await agent.session.aclose()
    # Someone else denies it through their own handle on the same data.
    async with stores() as store:
        other = await store.open("every")
        record = await decide(other, pending.call_id, "deny", by="ops", reason="no")
        assert record.requested == pending.seq
        await other.aclose()
    # The agent comes back and goes on: the free call's result, then the denial, in order.
    async with stores() as store:
        resumed = await Agent.resume(store, "every", model, _tools(ran))
        assert await _run(resumed) == ["completed"]
        assert ran.calls == ["read q"]
        assert [code for _id, code, _text in _results(resumed.session)] == [TOOL_DENIED, None]
        check_invariants(resumed.session)
        await resumed.session.aclose()
