"""The timeline projection: open turn/step, numbering, tool-call states and findings."""

from __future__ import annotations

import pytest
from hypothesis import given

from eventlog import (
    APPEND,
    AssistantMessage,
    Message,
    Replace,
    Session,
    StepEnd,
    StepStart,
    ToolCall,
    ToolCallPart,
    ToolOutcome,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
    open_store,
)
from projections._timeline import TIMELINE, Timeline, timeline
from projections.base import fold
from recovery.testing import AgentRun, agent_runs
from tests.ill_formed import unchecked

pytestmark = pytest.mark.anyio


def propose(session: Session, turn: int, step: int, *ids: str) -> int:
    calls = tuple(ToolCallPart(id=i, name="read", arguments="{}") for i in ids)
    message = Message.assistant("on it", tool_calls=calls)
    data = AssistantMessage(turn=turn, step=step, message=message, finish="tool-calls")
    return session.append("assistant/message", data, surface=APPEND).seq


def call(session: Session, turn: int, step: int, call_id: str) -> int:
    data = ToolCall(turn=turn, step=step, call_id=call_id, name="read", arguments="{}")
    return session.append("tool/call", data).seq


def outcome(session: Session, turn: int, step: int, call_id: str) -> int:
    result = Message.tool_result(call_id, "done")
    data = ToolOutcome(turn=turn, step=step, call_id=call_id, result=result)
    return session.append("tool/outcome", data).seq


def result(session: Session, turn: int, step: int, call_id: str, text: str = "done") -> int:
    data = ToolResult(turn=turn, step=step, message=Message.tool_result(call_id, text))
    return session.append("tool/result", data, surface=APPEND).seq


def rebuilt(session: Session) -> Timeline:
    return Timeline(fold(TIMELINE, session.window(0)))


async def test_empty_session_expects_turn_one(session: Session) -> None:
    view = timeline(session)
    assert (view.seq, view.turn, view.step, view.next_turn, view.next_step) == (
        -1,
        None,
        None,
        1,
        1,
    )
    assert view.calls() == () and view.dangling == () and view.findings == ()


async def test_numbering_follows_turns_and_steps(session: Session) -> None:
    session.append("turn/start", TurnStart(turn=1))
    assert timeline(session).turn is not None
    assert (timeline(session).next_turn, timeline(session).next_step) == (2, 1)
    session.append("step/start", StepStart(turn=1, step=1))
    session.append("step/end", StepEnd(turn=1, step=1))
    step2 = session.append("step/start", StepStart(turn=1, step=2)).seq
    view = timeline(session)
    assert view.step is not None and (view.step.number, view.step.seq) == (2, step2)
    assert view.next_step == 3
    session.append("step/end", StepEnd(turn=1, step=2))
    session.append("turn/end", TurnEnd(turn=1, reason="completed"))
    view = timeline(session)
    assert (view.turn, view.step, view.next_turn, view.next_step) == (None, None, 2, 1)
    assert view.findings == ()


async def test_call_states_carry_proving_seqs(session: Session) -> None:
    session.append("turn/start", TurnStart(turn=1))
    session.append("step/start", StepStart(turn=1, step=1))
    proposed = propose(session, 1, 1, "a", "b", "c")
    # b starts first and completes out of order; a starts later; c never starts.
    b_call = call(session, 1, 1, "b")
    b_outcome = outcome(session, 1, 1, "b")
    a_call = call(session, 1, 1, "a")
    a_result = result(session, 1, 1, "a")
    view = timeline(session)
    a, b, c = view.open_calls
    assert (a.status, a.proposed, a.call, a.result, a.index) == (
        "resulted",
        proposed,
        a_call,
        a_result,
        0,
    )
    assert (b.status, b.call, b.outcome, b.result, b.index) == (
        "completed",
        b_call,
        b_outcome,
        None,
        1,
    )
    assert (c.status, c.call, c.index) == ("proposed", None, 2)
    assert [x.call_id for x in view.dangling] == ["b", "c"]
    assert view.call(1, 1, "b") == b
    assert view.findings == ()


async def test_snapshot_never_changes(session: Session) -> None:
    session.append("turn/start", TurnStart(turn=1))
    session.append("step/start", StepStart(turn=1, step=1))
    propose(session, 1, 1, "a")
    held = timeline(session)
    call(session, 1, 1, "a")
    result(session, 1, 1, "a")
    session.append("step/end", StepEnd(turn=1, step=1))
    assert held.call(1, 1, "a") is not None
    assert held.call(1, 1, "a").status == "proposed"  # type: ignore[union-attr]
    assert [c.call_id for c in held.dangling] == ["a"]
    assert timeline(session).call(1, 1, "a").status == "resulted"  # type: ignore[union-attr]
    assert held == timeline(session, at=held.seq)


async def test_unanswered_call_in_closed_step_stays_unanswered(session: Session) -> None:
    session.append("turn/start", TurnStart(turn=1))
    session.append("step/start", StepStart(turn=1, step=1))
    propose(session, 1, 1, "a")
    session.append("step/end", StepEnd(turn=1, step=1))
    view = timeline(session)
    assert view.dangling == ()
    assert [c.call_id for c in view.unanswered] == ["a"]


async def test_pruning_replace_is_not_a_second_answer(session: Session) -> None:
    session.append("turn/start", TurnStart(turn=1))
    session.append("step/start", StepStart(turn=1, step=1))
    propose(session, 1, 1, "a")
    first = result(session, 1, 1, "a", "a very long output")
    pruned = ToolResult(turn=1, step=1, message=Message.tool_result("a", "[pruned]"))
    session.append("tool/result", pruned, surface=Replace(first, first), sources=(first,))
    view = timeline(session)
    assert view.call(1, 1, "a").result == first  # type: ignore[union-attr]
    assert view.findings == ()


@pytest.mark.parametrize(
    ("script", "finding"),
    [
        (["turn/start 2"], "seq 0: turn/start numbers turn 2, expected 1"),
        (["turn/start 1", "turn/start 2"], "seq 1: turn/start 2 while turn 1 is open"),
        (["turn/end 1"], "seq 0: turn/end 1 with no open turn"),
        (["turn/start 1", "step/start 2"], "seq 1: step/start numbers step 2, expected 1"),
        (["step/start 1"], "seq 0: step/start 1.1 outside turn 1"),
        (
            ["turn/start 1", "step/start 1", "turn/end 1"],
            "seq 2: turn/end 1 while step 1 is open",
        ),
        (["turn/start 1", "step/end 1"], "seq 1: step/end 1.1 does not close the open step"),
        (
            ["turn/start 1", "step/start 1", "call a"],
            "seq 2: tool/call 'a' was never proposed",
        ),
        (
            ["turn/start 1", "step/start 1", "propose a", "result a", "result a"],
            "seq 4: tool/result answers 'a' again (first at seq 3)",
        ),
        (
            ["turn/start 1", "step/start 1", "propose a", "outcome a"],
            "seq 3: tool/outcome for 'a' without a tool/call",
        ),
    ],
)
async def test_findings_name_seq_and_rule(
    session: Session, script: list[str], finding: str
) -> None:
    # An ill-formed log, as older versions wrote them (append refuses it now).
    unchecked(session)
    for line in script:
        verb, arg = line.split()
        if verb == "turn/start":
            session.append(verb, TurnStart(turn=int(arg)))
        elif verb == "turn/end":
            session.append(verb, TurnEnd(turn=int(arg), reason="completed"))
        elif verb == "step/start":
            session.append(verb, StepStart(turn=1, step=int(arg)))
        elif verb == "step/end":
            session.append(verb, StepEnd(turn=1, step=int(arg)))
        elif verb == "propose":
            propose(session, 1, 1, arg)
        elif verb == "call":
            call(session, 1, 1, arg)
        elif verb == "outcome":
            outcome(session, 1, 1, arg)
        else:
            result(session, 1, 1, arg)
    assert [f.message for f in timeline(session).findings] == [finding]


async def test_incremental_equals_rebuild_after_every_event(session: Session) -> None:
    session.append("turn/start", TurnStart(turn=1))
    session.append("user/message", UserMessage(message=Message.user("hi")), surface=APPEND)
    assert timeline(session) == rebuilt(session)
    session.append("step/start", StepStart(turn=1, step=1))
    propose(session, 1, 1, "a", "b")
    assert timeline(session) == rebuilt(session)
    call(session, 1, 1, "b")
    assert timeline(session) == rebuilt(session)
    outcome(session, 1, 1, "b")
    call(session, 1, 1, "a")
    result(session, 1, 1, "a")
    assert timeline(session) == rebuilt(session)
    result(session, 1, 1, "b")
    session.append("step/end", StepEnd(turn=1, step=1))
    session.append("turn/end", TurnEnd(turn=1, reason="completed"))
    assert timeline(session) == rebuilt(session)
    assert timeline(session) != timeline(session, at=3)


@given(run=agent_runs())
async def test_caught_up_equals_rebuild_after_every_event_and_views_hold(run: AgentRun) -> None:
    async with open_store("memory:") as store:
        session = await store.create()
        held = []
        for planned in run.events:
            session.append(
                planned.type, planned.data, surface=planned.surface, sources=planned.sources
            )
            view = timeline(session)
            assert view == timeline(session, at=session.head)
            held.append(view)
        # A snapshot read earlier never changes as the session moves on.
        for seq, view in enumerate(held):
            assert view.seq == seq
            assert view == timeline(session, at=seq)
        final = timeline(session)
        assert final.turn is None and final.step is None and final.findings == ()
        assert final.unanswered == () and all(c.status == "resulted" for c in final.calls())
