"""recovery.testing itself: check_invariants names every violation; FaultyStore faults writes."""

from __future__ import annotations

import pytest

from eventlog import (
    APPEND,
    AssistantMessage,
    Message,
    MessageSource,
    Session,
    StepEnd,
    StepStart,
    StoreWriteError,
    TextPart,
    ToolCallPart,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
    open_store,
)
from eventlog.stores import MemoryData
from projections import timeline
from recovery.testing import (
    FaultyStore,
    InvariantViolation,
    SimulatedCrash,
    check_invariants,
    random_run,
)
from tests.ill_formed import unchecked

pytestmark = pytest.mark.anyio


@pytest.fixture
def session_id() -> str:
    return "s"  # named in this module's expected messages


def violations(session: Session) -> list[str]:
    with pytest.raises(InvariantViolation) as caught:
        check_invariants(session)
    assert str(caught.value).startswith(
        f"session 's' (head {session.head}) violates {len(caught.value.violations)} invariant(s):"
    )
    return list(caught.value.violations)


def user(text: str, id: str) -> UserMessage:
    return UserMessage(message=Message.user(text, id=id))


async def test_a_generated_run_passes(session: Session) -> None:
    await random_run(3).play(session)
    check_invariants(session)


async def test_open_turn_and_step_are_violations(session: Session) -> None:
    session.append("turn/start", TurnStart(turn=1))
    session.append("step/start", StepStart(turn=1, step=1))
    assert violations(session) == [
        "balance: turn 1 (seq 0) is still open",
        "balance: step 1.1 (seq 1) is still open",
    ]


async def test_broken_numbering_is_a_violation(session: Session) -> None:
    unchecked(session)  # an ill-formed log, as older versions wrote them
    session.append("turn/start", TurnStart(turn=2))
    session.append("turn/end", TurnEnd(turn=2, reason="completed"))
    assert violations(session) == ["timeline: seq 0: turn/start numbers turn 2, expected 1"]


async def test_a_result_answering_nothing_is_a_violation(session: Session) -> None:
    session.append("turn/start", TurnStart(turn=1))
    session.append("step/start", StepStart(turn=1, step=1))
    orphan = ToolResult(turn=1, step=1, message=Message.tool_result("x", "?", id="r"))
    session.append("tool/result", orphan, surface=APPEND)
    session.append("step/end", StepEnd(turn=1, step=1))
    session.append("turn/end", TurnEnd(turn=1, reason="completed"))
    assert violations(session) == [
        "timeline: seq 2: tool/result answers 'x', which was never proposed",
        "answers: message 0 (tool 'r') answers 'x'; expected no result",
    ]


async def test_results_out_of_the_models_order_are_a_violation(session: Session) -> None:
    session.append("turn/start", TurnStart(turn=1))
    session.append("step/start", StepStart(turn=1, step=1))
    calls = tuple(ToolCallPart(id=i, name="t", arguments="{}") for i in ("a", "b"))
    proposal = Message.assistant(tool_calls=calls, id="m")
    session.append(
        "assistant/message", AssistantMessage(turn=1, step=1, message=proposal), surface=APPEND
    )
    for call_id in ("b", "a"):
        data = ToolResult(turn=1, step=1, message=Message.tool_result(call_id, "", id=call_id))
        session.append("tool/result", data, surface=APPEND)
    session.append("step/end", StepEnd(turn=1, step=1))
    session.append("turn/end", TurnEnd(turn=1, reason="completed"))
    assert violations(session) == ["answers: message 1 (tool 'b') answers 'b'; expected 'a'"]


async def test_a_message_a_provider_refuses_is_a_violation(session: Session) -> None:
    odd = Message(
        id="u",
        role="user",
        content=(TextPart(text="hi"), ToolCallPart(id="c", name="t", arguments="{}")),
        source=MessageSource(kind="user"),
    )
    session.append("user/message", UserMessage(message=odd), surface=APPEND)
    found = violations(session)
    assert found[-2:] == [
        "provider: OpenAI refuses the history: message 'u' (user): a user message cannot carry "
        "a ToolCallPart",
        "provider: Anthropic refuses the history: message 'u' (user): a user message cannot "
        "carry a ToolCallPart",
    ]


async def test_a_projection_that_drifted_from_a_rebuild_is_a_violation(session: Session) -> None:
    session.append("user/message", user("one", "u1"), surface=APPEND)
    timeline(session)
    # Act out a projection bug: the cached state claims a turn is open.
    session.projection_cache["projections.timeline"][0].last_turn = 5
    session.projection_cache["projections.timeline"][0].snapshot = None
    assert violations(session) == [
        "rebuild: timeline caught up incrementally differs from a rebuild"
    ]


async def test_every_violation_is_listed_not_just_the_first(session: Session) -> None:
    unchecked(session)  # an ill-formed log, as older versions wrote them
    session.append("turn/start", TurnStart(turn=3))
    session.append("step/start", StepStart(turn=3, step=2))
    assert violations(session) == [
        "balance: turn 3 (seq 0) is still open",
        "balance: step 3.2 (seq 1) is still open",
        "timeline: seq 0: turn/start numbers turn 3, expected 1",
        "timeline: seq 1: step/start numbers step 2, expected 1",
    ]


# -- FaultyStore --------------------------------------------------------------------------------


async def test_a_failed_write_keeps_the_batch_and_the_next_flush_writes_it() -> None:
    disk = MemoryData()
    async with FaultyStore(open_store("memory:", data=disk), fail_at=1, failures=2) as store:
        session = await store.create(session_id="s")
        session.append("user/message", user("one", "u1"), surface=APPEND)
        await session.flush()  # write 0
        session.append("user/message", user("two", "u2"), surface=APPEND)
        for index in (1, 2):
            with pytest.raises(StoreWriteError) as caught:
                await session.flush()
            assert str(caught.value.__cause__) == f"write {index}: injected write failure"
        await session.flush()  # write 3
        assert (store.writes, store.crashed, session.durable) == (4, False, 1)
    assert [row.seq for row in disk.rows["s"]] == [0, 1]


@pytest.mark.parametrize(("after_write", "stored"), [(False, [0]), (True, [0, 1])])
async def test_a_crash_stops_every_later_write(after_write: bool, stored: list[int]) -> None:
    disk = MemoryData()
    faulty = FaultyStore(
        open_store("memory:", data=disk), crash_at=1, crash_after_write=after_write
    )
    async with faulty as store:
        session = await store.create(session_id="s")
        session.append("user/message", user("one", "u1"), surface=APPEND)
        await session.flush()
        session.append("user/message", user("two", "u2"), surface=APPEND)
        with pytest.raises(StoreWriteError) as caught:
            await session.flush()
        landed = "after" if after_write else "before"
        assert isinstance(caught.value.__cause__, SimulatedCrash)
        assert str(caught.value.__cause__) == f"write 1: simulated crash {landed} the write"
        with pytest.raises(StoreWriteError) as again:
            await session.flush()
        assert str(again.value.__cause__) == "write 2: the store crashed at write 1"
        assert store.crashed and session.durable == 0
    assert [row.seq for row in disk.rows["s"]] == stored


async def test_faulty_store_wraps_a_backend_directly() -> None:
    from eventlog.stores import MemoryBackend

    async with FaultyStore(MemoryBackend(), crash_at=0) as store:
        session = await store.create(session_id="s")
        session.append("user/message", user("one", "u1"), surface=APPEND)
        with pytest.raises(StoreWriteError):
            await session.flush()
        assert repr(store) == "<LogStore 'faulty' open_sessions=1>"
