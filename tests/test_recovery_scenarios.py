"""Recovery, one scenario per test: what scan reports and exactly which closers repair appends."""

from __future__ import annotations

from typing import Any

import pytest

from eventlog import (
    APPEND,
    AssistantMessage,
    ClosedError,
    Event,
    Message,
    MessageSource,
    Session,
    StepEnd,
    StepStart,
    StoreWriteError,
    ToolCall,
    ToolCallPart,
    ToolError,
    ToolOutcome,
    ToolResult,
    ToolResultPart,
    TurnEnd,
    TurnStart,
    UserMessage,
    open_store,
)
from eventlog.stores import MemoryData
from projections import timeline
from recovery import (
    TOOL_NOT_STARTED,
    TOOL_OUTCOME_UNKNOWN,
    not_started_text,
    outcome_unknown_text,
    repair,
    scan,
)
from recovery._diagnosis import classify
from recovery.testing import FaultyStore, InvariantViolation, check_invariants
from tests.ill_formed import unchecked

pytestmark = pytest.mark.anyio


@pytest.fixture
def session_id() -> str:
    return "s"  # named in this module's expected messages


# -- a small script language for logs ---------------------------------------------------------


def turn(session: Session, n: int) -> None:
    session.append("turn/start", TurnStart(turn=n))
    session.append("user/message", UserMessage(message=Message.user(f"go {n}")), surface=APPEND)


def step(session: Session, t: int, s: int) -> None:
    session.append("step/start", StepStart(turn=t, step=s))


def propose(session: Session, t: int, s: int, *ids: str) -> int:
    calls = tuple(ToolCallPart(id=i, name=f"tool_{i}", arguments="{}") for i in ids)
    data = AssistantMessage(
        turn=t, step=s, message=Message.assistant(tool_calls=calls), finish="tool-calls"
    )
    return session.append("assistant/message", data, surface=APPEND).seq


def call(session: Session, t: int, s: int, call_id: str) -> int:
    data = ToolCall(turn=t, step=s, call_id=call_id, name=f"tool_{call_id}", arguments="{}")
    return session.append("tool/call", data).seq


def outcome(session: Session, t: int, s: int, call_id: str, text: str) -> int:
    data = ToolOutcome(
        turn=t,
        step=s,
        call_id=call_id,
        result=Message.tool_result(call_id, text, id=f"out-{call_id}"),
    )
    return session.append("tool/outcome", data).seq


def result(session: Session, t: int, s: int, call_id: str) -> int:
    data = ToolResult(turn=t, step=s, message=Message.tool_result(call_id, "ok"))
    return session.append("tool/result", data, surface=APPEND).seq


def end_step(session: Session, t: int, s: int) -> None:
    session.append("step/end", StepEnd(turn=t, step=s))


def end_turn(session: Session, t: int) -> None:
    session.append("turn/end", TurnEnd(turn=t, reason="completed"))


def balanced_turn(session: Session, t: int) -> None:
    turn(session, t)
    step(session, t, 1)
    propose(session, t, 1, f"c{t}")
    call(session, t, 1, f"c{t}")
    result(session, t, 1, f"c{t}")
    end_step(session, t, 1)
    end_turn(session, t)


def appended(session: Session, seqs: tuple[int, ...]) -> list[tuple[str, Any]]:
    return [(e.type, e.data) for e in (session.window(0)[s] for s in seqs)]


def closer_types(session: Session, seqs: tuple[int, ...]) -> list[str]:
    return [session.window(0)[s].type for s in seqs]


def tool_result(event: Event) -> tuple[ToolResult, ToolResultPart]:
    data = event.data
    assert isinstance(data, ToolResult)
    part = data.message.content[0]
    assert isinstance(part, ToolResultPart)
    return data, part


# -- the scenarios -----------------------------------------------------------------------------


async def test_balanced_log_needs_nothing(session: Session) -> None:
    balanced_turn(session, 1)
    balanced_turn(session, 2)
    diagnosis = scan(session)
    assert diagnosis.clean and not diagnosis.needs_repair
    report = await repair(session)
    assert report.appended == ()
    assert session.head == 15  # 8 events per turn, nothing added
    check_invariants(session)


async def test_empty_log_needs_nothing(session: Session) -> None:
    diagnosis = scan(session)
    assert (diagnosis.head, diagnosis.open_turn, diagnosis.clean) == (-1, None, True)
    assert (await repair(session)).appended == ()
    assert session.head == -1
    check_invariants(session)


async def test_open_turn_without_step_gets_only_turn_end(session: Session) -> None:
    balanced_turn(session, 1)
    turn(session, 2)
    diagnosis = scan(session)
    assert diagnosis.open_turn is not None and diagnosis.open_turn.number == 2
    assert diagnosis.open_step is None
    report = await repair(session)
    assert appended(session, report.appended) == [
        ("turn/end", TurnEnd(turn=2, reason="interrupted"))
    ]
    check_invariants(session)


async def test_open_step_gets_step_end_then_turn_end(session: Session) -> None:
    turn(session, 1)
    step(session, 1, 1)
    report = await repair(session)
    assert appended(session, report.appended) == [
        ("step/end", StepEnd(turn=1, step=1)),
        ("turn/end", TurnEnd(turn=1, reason="interrupted")),
    ]
    check_invariants(session)


async def test_proposed_call_without_tool_call_is_not_started(session: Session) -> None:
    turn(session, 1)
    step(session, 1, 1)
    proposed = propose(session, 1, 1, "a")
    [dangling] = scan(session).dangling
    assert (dangling.kind, dangling.proof) == ("proposed", (proposed,))
    assert dangling.kind == dangling.call.status  # one name for the state, as in the timeline
    report = await repair(session)
    assert closer_types(session, report.appended) == ["tool/result", "step/end", "turn/end"]
    event = (await session.events())[report.appended[0]]
    data, part = tool_result(event)
    assert data.error == ToolError(name="ToolNotStartedError", code=TOOL_NOT_STARTED)
    assert (part.call_id, part.is_error) == ("a", True)
    assert part.content == (
        "The tool call tool_a (id a) never started: the process stopped before it ran, so it "
        "had no effect. It is safe to retry it if it is still needed."
    )
    assert part.content == not_started_text("tool_a", "a")
    assert event.sources == (proposed,)
    assert data.message.source == MessageSource(kind="recovery")
    check_invariants(session)


async def test_an_answered_call_is_not_classified_as_dangling(session: Session) -> None:
    turn(session, 1)
    step(session, 1, 1)
    propose(session, 1, 1, "a")
    report = await repair(session)
    [answered] = timeline(session).calls()
    assert answered.status == "resulted"
    with pytest.raises(ValueError) as info:
        classify(answered)
    assert str(info.value) == f"call 'a' was answered at seq {report.appended[0]}"


async def test_started_call_has_unknown_outcome_citing_its_tool_call(session: Session) -> None:
    turn(session, 1)
    step(session, 1, 1)
    proposed = propose(session, 1, 1, "a")
    started = call(session, 1, 1, "a")
    [dangling] = scan(session).dangling
    assert (dangling.kind, dangling.proof) == ("started", (proposed, started))
    report = await repair(session)
    event = (await session.events())[report.appended[0]]
    data, part = tool_result(event)
    assert data.error == ToolError(name="ToolOutcomeUnknownError", code=TOOL_OUTCOME_UNKNOWN)
    assert part.content == (
        "The tool call tool_a (id a) was interrupted: the process stopped after the call "
        "started and before its result was recorded, so it may or may not have run. Retry it "
        "only if it is read-only or idempotent. Otherwise, first check the external state it "
        "would have changed, and do not repeat it if it already took effect."
    )
    assert part.content == outcome_unknown_text("tool_a", "a")
    assert event.sources == (started,)
    check_invariants(session)


async def test_completed_call_gets_its_recorded_result(session: Session) -> None:
    turn(session, 1)
    step(session, 1, 1)
    proposed = propose(session, 1, 1, "a", "b")
    call(session, 1, 1, "a")
    started_b = call(session, 1, 1, "b")
    finished_b = outcome(session, 1, 1, "b", "b's output")  # b finished ahead of a
    _, b = scan(session).dangling
    assert (b.kind, b.proof) == ("completed", (proposed, started_b, finished_b))
    report = await repair(session)
    event = (await session.events())[report.appended[1]]
    data, part = tool_result(event)
    assert (part.call_id, part.content, part.is_error, data.error) == (
        "b",
        "b's output",
        False,
        None,
    )
    assert data.message.id == "out-b"
    assert data.message.source == MessageSource(kind="recovery")
    assert event.sources == (started_b, finished_b)
    check_invariants(session)


async def test_answered_call_needs_no_result(session: Session) -> None:
    turn(session, 1)
    step(session, 1, 1)
    propose(session, 1, 1, "a")
    call(session, 1, 1, "a")
    result(session, 1, 1, "a")
    assert scan(session).dangling == ()
    report = await repair(session)
    assert closer_types(session, report.appended) == ["step/end", "turn/end"]
    check_invariants(session)


async def test_unanswered_call_in_closed_step_is_reported_not_repaired(session: Session) -> None:
    turn(session, 1)
    step(session, 1, 1)
    proposed = propose(session, 1, 1, "a")
    end_step(session, 1, 1)
    end_turn(session, 1)
    diagnosis = scan(session)
    assert diagnosis.dangling == () and not diagnosis.needs_repair
    [left] = diagnosis.unanswered_in_closed_steps
    assert (left.call_id, left.proposed, left.status) == ("a", proposed, "proposed")
    assert (await repair(session)).appended == ()
    with pytest.raises(InvariantViolation) as caught:
        check_invariants(session)
    assert str(caught.value) == (
        "session 's' (head 5) violates 2 invariant(s):\n"
        "  - answers: call 'a' of step 1.1 (proposed at seq 3) has no tool/result\n"
        "  - answers: the history ends while ['a'] are unanswered"
    )


async def test_only_the_open_turn_is_repaired(session: Session) -> None:
    # Turn 1 closed its step with a call unanswered (reported only); turn 2 is open.
    turn(session, 1)
    step(session, 1, 1)
    propose(session, 1, 1, "old")
    end_step(session, 1, 1)
    end_turn(session, 1)
    turn(session, 2)
    step(session, 2, 1)
    propose(session, 2, 1, "new")
    diagnosis = scan(session)
    assert [d.call.call_id for d in diagnosis.dangling] == ["new"]
    assert [c.call_id for c in diagnosis.unanswered_in_closed_steps] == ["old"]
    report = await repair(session)
    assert appended(session, report.appended)[1:] == [
        ("step/end", StepEnd(turn=2, step=1)),
        ("turn/end", TurnEnd(turn=2, reason="interrupted")),
    ]
    data, part = tool_result((await session.events())[report.appended[0]])
    assert (data.turn, data.step, part.call_id) == (2, 1, "new")


async def test_several_dangling_calls_get_one_result_each_in_proposal_order(
    session: Session,
) -> None:
    turn(session, 1)
    step(session, 1, 1)
    propose(session, 1, 1, "a", "b", "c", "d")
    # d starts first, then b; b finishes ahead of a; a is answered; c never starts.
    call(session, 1, 1, "d")
    call(session, 1, 1, "a")
    call(session, 1, 1, "b")
    outcome(session, 1, 1, "b", "b done")
    report = await repair(session)
    results = [tool_result((await session.events())[s]) for s in report.appended[:4]]
    assert [(part.call_id, data.error.code if data.error else None) for data, part in results] == [
        ("a", TOOL_OUTCOME_UNKNOWN),
        ("b", None),
        ("c", TOOL_NOT_STARTED),
        ("d", TOOL_OUTCOME_UNKNOWN),
    ]
    assert closer_types(session, report.appended)[4:] == ["step/end", "turn/end"]
    check_invariants(session)


async def test_repair_twice_appends_nothing_the_second_time(session: Session) -> None:
    turn(session, 1)
    step(session, 1, 1)
    propose(session, 1, 1, "a", "b")
    call(session, 1, 1, "a")
    first = await repair(session)
    assert len(first.appended) == 4
    head = session.head
    second = await repair(session)
    assert second.appended == () and session.head == head
    assert second.diagnosis.clean


async def test_closers_reuse_the_last_events_time_and_continue_the_seq(session: Session) -> None:
    session.append("turn/start", TurnStart(turn=1), time=1_000)
    session.append("step/start", StepStart(turn=1, step=1), time=2_000)
    report = await repair(session)
    assert report.appended == (2, 3)
    assert [(await session.events())[s].time for s in report.appended] == [2_000, 2_000]


async def test_repair_flushes_and_survives_a_restart() -> None:
    disk = MemoryData()
    async with open_store("memory:", data=disk, write_delay=3600) as store:
        session = await store.create(session_id="s")
        turn(session, 1)
        step(session, 1, 1)
        propose(session, 1, 1, "a")
        report = await repair(session)
        assert session.durable == session.head == report.appended[-1]
    async with open_store("memory:", data=disk.restarted()) as store:
        again = await store.open("s")
        assert again.head == report.appended[-1]
        assert (await repair(again)).appended == ()
        check_invariants(again)


async def test_scan_is_read_only(session: Session) -> None:
    turn(session, 1)
    step(session, 1, 1)
    propose(session, 1, 1, "a")
    head, durable = session.head, session.durable
    assert scan(session) == scan(session)
    assert (session.head, session.durable) == (head, durable)


async def test_repair_of_a_read_only_session_refuses() -> None:
    disk = MemoryData()
    async with open_store("memory:", data=disk) as store:
        session = await store.create(session_id="s")
        turn(session, 1)
        await session.flush()
    async with open_store("memory:", data=disk.restarted()) as store:
        salvaged = await store.open("s", salvage=True)
        with pytest.raises(ClosedError):
            await repair(salvaged)
        assert salvaged.head == 1


async def test_integrity_findings_are_reported(session: Session) -> None:
    turn(session, 1)
    unchecked(session)  # then ill-formed, as older versions let a log become
    session.append("turn/start", TurnStart(turn=3))
    diagnosis = scan(session)
    assert [f.message for f in diagnosis.findings] == [
        "seq 2: turn/start 3 while turn 1 is open",
        "seq 2: turn/start numbers turn 3, expected 2",
    ]


async def test_a_repair_whose_write_fails_is_retried_without_new_closers() -> None:
    disk = MemoryData()
    async with FaultyStore(open_store("memory:", data=disk), fail_at=1) as store:
        session = await store.create(session_id="s")
        turn(session, 1)
        step(session, 1, 1)
        propose(session, 1, 1, "a")
        await session.flush()  # write 0
        with pytest.raises(StoreWriteError):
            await repair(session)  # write 1 fails; the closers stay queued
        assert session.head == 6 and session.durable == 3
        retry = await repair(session)  # write 2
        assert retry.appended == () and session.durable == 6
    assert [row.type for row in disk.rows["s"][4:]] == ["tool/result", "step/end", "turn/end"]
