"""The ordered parallel executor: groups, cap, model-order results, invalid calls, cancel."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import msgspec
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from agent import (
    ABORTED_BEFORE_DISPATCH,
    INVALID_ARGUMENTS,
    OUTPUT_TOO_LARGE,
    TOOL_FAILED,
    UNKNOWN_TOOL,
    ExecutionReport,
    Toolbox,
    ToolExecutor,
    tool,
)
from eventlog import (
    APPEND,
    AssistantMessage,
    Message,
    Session,
    StepStart,
    ToolCallPart,
    ToolError,
    TurnStart,
    open_store,
)
from projections import timeline
from tests.agent_children.support import Probe, Tracker, events_of

pytestmark = pytest.mark.anyio


def _calls(*specs: tuple[str, str]) -> list[ToolCallPart]:
    return [ToolCallPart(id=f"c{i}", name=n, arguments=a) for i, (n, a) in enumerate(specs)]


async def _run(
    session: Session,
    toolbox: Toolbox,
    calls: Sequence[ToolCallPart],
    *,
    cancel: anyio.Event | None = None,
    max_parallel: int = 10,
) -> ExecutionReport:
    """Frame the calls as step 1.1's assistant message and execute them."""
    session.append("turn/start", TurnStart(turn=1))
    session.append("step/start", StepStart(turn=1, step=1))
    assistant = session.append(
        "assistant/message",
        AssistantMessage(
            turn=1, step=1, message=Message.assistant(tool_calls=tuple(calls)), finish="tool-calls"
        ),
        surface=APPEND,
    )
    executor = ToolExecutor(
        session,
        toolbox,
        turn=1,
        step=1,
        cancel=cancel or anyio.Event(),
        max_parallel=max_parallel,
    )
    with anyio.fail_after(10):
        return await executor.run(calls, assistant_seq=assistant.seq)


def _result_ids(session: Session) -> list[str]:
    return [e.data.message.tool_results[0].call_id for e in events_of(session, "tool/result")]


def _tools(tracker: Tracker) -> Toolbox:
    return Toolbox([Probe("safe", tracker, safe=True), Probe("solo", tracker, safe=False)])


async def test_parallel_siblings_all_start_before_any_finishes(session: Session) -> None:
    tracker = Tracker()
    calls = _calls(("safe", "{}"), ("safe", "{}"), ("safe", "{}"))
    release = anyio.Event()
    for call in calls:
        tracker.gates[call.id] = release

    async def release_when_all_started() -> None:
        for call in calls:
            await tracker.started_event(call.id).wait()
        release.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(release_when_all_started)
        await _run(session, _tools(tracker), calls)
    # All three started before the first finish.
    assert [kind for kind, _ in tracker.log] == ["start"] * 3 + ["finish"] * 3
    assert _result_ids(session) == ["c0", "c1", "c2"]


async def test_an_exclusive_call_between_parallel_ones_forms_three_groups(
    session: Session,
) -> None:
    tracker = Tracker()
    spin = '{"spins": 3}'
    calls = _calls(("safe", spin), ("safe", spin), ("solo", spin), ("safe", spin), ("safe", spin))
    await _run(session, _tools(tracker), calls)
    # Group 1 = c0, c1 together; then c2 alone; then c3, c4 together.
    assert tracker.log[:2] == [("start", "c0"), ("start", "c1")]
    assert tracker.log[4:6] == [("start", "c2"), ("finish", "c2")]
    assert tracker.log[6:8] == [("start", "c3"), ("start", "c4")]
    assert tracker.overlaps == []
    assert _result_ids(session) == ["c0", "c1", "c2", "c3", "c4"]


async def test_at_most_max_parallel_calls_are_in_flight(session: Session) -> None:
    tracker = Tracker()
    calls = _calls(*[("safe", '{"spins": 2}')] * 7)
    await _run(session, _tools(tracker), calls, max_parallel=3)
    assert tracker.max_in_flight == 3
    assert _result_ids(session) == [f"c{i}" for i in range(7)]


async def test_max_parallel_one_is_serial(session: Session) -> None:
    tracker = Tracker()
    await _run(session, _tools(tracker), _calls(*[("safe", '{"spins": 2}')] * 3), max_parallel=1)
    assert [k for k, _ in tracker.log] == ["start", "finish"] * 3


async def test_an_invalid_cap_is_refused(session: Session) -> None:
    with pytest.raises(ValueError, match="max_parallel must be an integer >= 1, got int 0"):
        ToolExecutor(session, Toolbox(), turn=1, step=1, cancel=anyio.Event(), max_parallel=0)


async def test_a_later_call_finishing_first_is_made_durable_as_outcome(session: Session) -> None:
    tracker = Tracker()
    calls = _calls(("safe", "{}"), ("safe", "{}"))
    tracker.gate("c0")

    async def release_c0_after_c1_finished() -> None:
        await tracker.started_event("c1").wait()
        while ("finish", "c1") not in tracker.log or session.durable < session.head:
            await anyio.lowlevel.checkpoint()
        tracker.gate("c0").set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(release_c0_after_c1_finished)
        await _run(session, _tools(tracker), calls)
    types = [e.type for e in await session.events()]
    assert types[3:] == [
        "tool/call",
        "tool/call",
        "tool/outcome",
        "tool/result",
        "tool/result",
    ]
    outcome = events_of(session, "tool/outcome")[0]
    assert outcome.data.call_id == "c1"
    # Results in the model's order; c1's result cites its call and its outcome.
    assert _result_ids(session) == ["c0", "c1"]
    c1_call = events_of(session, "tool/call")[1]
    assert events_of(session, "tool/result")[1].sources == (c1_call.seq, outcome.seq)
    assert timeline(session).findings == ()


async def test_tool_call_is_durable_before_the_body_runs(session: Session) -> None:
    tracker = Tracker()
    seen: list[tuple[int, int]] = []

    async def body_sees() -> None:
        await tracker.started_event("c0").wait()
        seen.append((session.durable, events_of(session, "tool/call")[0].seq))
        tracker.gate("c0").set()

    tracker.gate("c0")
    async with anyio.create_task_group() as tg:
        tg.start_soon(body_sees)
        await _run(session, _tools(tracker), _calls(("solo", "{}")))
    durable, call_seq = seen[0]
    assert durable >= call_seq


async def test_invalid_json_and_unknown_tools_answer_without_running(session: Session) -> None:
    tracker = Tracker()
    calls = _calls(("safe", "{not json"), ("nope", "{}"), ("safe", "[1]"), ("safe", "{}"))
    await _run(session, _tools(tracker), calls)
    assert tracker.starts() == ["c3"]
    results = events_of(session, "tool/result")
    codes = [r.data.error.code if r.data.error else None for r in results]
    assert codes == [INVALID_ARGUMENTS, UNKNOWN_TOOL, INVALID_ARGUMENTS, None]
    assert results[1].data.message.tool_results[0].content == (
        "unknown tool 'nope'; available: safe, solo"
    )
    assert results[2].data.message.tool_results[0].content == (
        "invalid arguments for tool 'safe': not an object"
    )
    # Every result answers a logged tool/call.
    assert [e.data.call_id for e in events_of(session, "tool/call")] == ["c0", "c1", "c2", "c3"]


async def test_a_raising_body_becomes_an_error_result(session: Session) -> None:
    tracker = Tracker()
    await _run(session, _tools(tracker), _calls(("solo", '{"fail": true}')))
    result = events_of(session, "tool/result")[0].data
    assert result.error is not None
    assert (result.error.name, result.error.code) == ("RuntimeError", TOOL_FAILED)
    assert result.message.tool_results[0].content == "RuntimeError: probe c0 failed"
    assert result.message.tool_results[0].is_error


async def test_cancel_before_the_group_starts_nothing(session: Session) -> None:
    tracker = Tracker()
    cancel = anyio.Event()
    cancel.set()
    report = await _run(
        session, _tools(tracker), _calls(("safe", "{}"), ("solo", "{}")), cancel=cancel
    )
    assert tracker.log == []
    assert report.aborted == 2
    # Each unstarted call gets a tool/call + tool/result pair coded ABORTED_BEFORE_DISPATCH.
    assert [e.type for e in await session.events()][3:] == ["tool/call", "tool/result"] * 2
    for result in events_of(session, "tool/result"):
        assert result.data.error.code == ABORTED_BEFORE_DISPATCH
        assert result.data.error.name == "AbortError"


async def test_cancel_during_a_group_drains_started_calls_and_aborts_the_rest(
    session: Session,
) -> None:
    tracker = Tracker()
    cancel = anyio.Event()
    calls = _calls(("safe", "{}"), ("safe", "{}"), ("solo", "{}"), ("safe", "{}"))
    tracker.gate("c0")
    tracker.gate("c1")

    async def cancel_while_running() -> None:
        await tracker.started_event("c1").wait()
        cancel.set()
        tracker.gate("c0").set()
        tracker.gate("c1").set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(cancel_while_running)
        report = await _run(session, _tools(tracker), calls, cancel=cancel)
    # The started pair ran to completion; the barrier and the call after it never started.
    assert tracker.starts() == ["c0", "c1"]
    assert report.aborted == 2
    codes = [r.data.error.code if r.data.error else None for r in events_of(session, "tool/result")]
    assert codes == [None, None, ABORTED_BEFORE_DISPATCH, ABORTED_BEFORE_DISPATCH]
    assert _result_ids(session) == ["c0", "c1", "c2", "c3"]
    assert timeline(session).dangling == ()


async def test_cancel_after_the_group_changes_nothing(session: Session) -> None:
    tracker = Tracker()
    cancel = anyio.Event()
    report = await _run(
        session, _tools(tracker), _calls(("safe", "{}"), ("safe", "{}")), cancel=cancel
    )
    cancel.set()
    assert report.aborted == 0
    assert all(r.data.error is None for r in events_of(session, "tool/result"))


async def test_a_concluding_result_is_reported(session: Session) -> None:
    tracker = Tracker()
    report = await _run(session, _tools(tracker), _calls(("solo", '{"conclude": true}')))
    assert report.concluded


class _Plan(msgspec.Struct, frozen=True):
    safe: bool
    spins: int


@given(
    plans=st.lists(
        st.builds(_Plan, safe=st.booleans(), spins=st.integers(0, 6)), min_size=1, max_size=12
    ),
    cap=st.integers(1, 5),
)
def test_order_cap_and_exclusivity_always_hold(plans: list[_Plan], cap: int) -> None:
    note(f"cap={cap} plans={plans}")

    async def scenario() -> None:
        tracker = Tracker()
        calls = [
            ToolCallPart(
                id=f"c{i}", name="safe" if p.safe else "solo", arguments=f'{{"spins": {p.spins}}}'
            )
            for i, p in enumerate(plans)
        ]
        async with open_store("memory:") as store:
            session = await store.create()
            await _run(session, _tools(tracker), calls, max_parallel=cap)
            # Order: results in the model's order, whatever finished first.
            assert _result_ids(session) == [c.id for c in calls]
            # Cap and exclusivity.
            assert tracker.max_in_flight <= cap
            assert tracker.overlaps == []
            # Calls start in the model's order, each after its tool/call was durable.
            assert tracker.starts() == [c.id for c in calls]
            assert timeline(session).dangling == ()
            assert timeline(session).findings == ()

    anyio.run(scenario)


async def test_an_output_too_large_for_the_log_becomes_an_error_result() -> None:
    @tool
    def huge() -> str:
        return "x" * 200_000

    async with open_store("memory:", max_event_bytes=100_000) as store:
        session = await store.create()
        await _run(session, Toolbox([huge]), _calls(("huge", "{}")))
        (result,) = events_of(session, "tool/result")
        assert result.data.error == ToolError(name="OutputTooLargeError", code=OUTPUT_TOO_LARGE)
        assert result.data.message.tool_results[0].content == (
            "the tool output was 200000 bytes, over the session's limit of 100000 bytes per "
            "event; it was dropped"
        )
