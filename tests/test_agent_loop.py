"""The agent loop: turns, steps, streaming honesty, cancel, retries, inbox, resume."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent import (
    CHECKPOINT_FAILED,
    Agent,
    AgentBusyError,
    Chunk,
    ModelRequest,
    OpenTurnError,
    Response,
    RetryPolicy,
    ScriptedModel,
    TextDelta,
    ToolContext,
    ToolOutput,
    prompt,
)
from eventlog import (
    APPEND,
    AssistantMessage,
    Event,
    Message,
    Session,
    StepStart,
    ToolCall,
    ToolCallPart,
    ToolError,
    TurnStart,
    UserMessage,
    open_store,
)
from eventlog.stores import MemoryData
from projections import inbox, messages, timeline
from recovery import TOOL_OUTCOME_UNKNOWN, scan
from recovery.testing import FaultyStore, check_invariants
from tests.agent_children.support import Probe, Tracker, events_of

pytestmark = pytest.mark.anyio


def _types(session: Session, from_seq: int = 0) -> list[str]:
    return [e.type for e in session.window(from_seq)]


def _probes(tracker: Tracker) -> list[Probe]:
    return [Probe("safe", tracker, safe=True), Probe("solo", tracker, safe=False)]


async def _run(agent: Agent) -> list[str]:
    with anyio.fail_after(10):
        return [o.reason for o in await agent.run_until_idle()]


async def _steer_while_held(
    agent: Agent, reached: anyio.Event, release: anyio.Event, text: str
) -> None:
    """Run the agent; once the model holds its reply (``reached``), steer, then release it."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(_run, agent)
        await reached.wait()
        agent.steer(text)
        release.set()


async def test_a_simple_turn_writes_the_documented_events(session: Session) -> None:
    model = ScriptedModel([Response(text="Hello there.")])
    agent = Agent(session, model, system="be brief")
    agent.followup("hi")
    assert await _run(agent) == ["completed"]
    assert _types(session) == [
        "agent/inbox/spliced",
        "turn/start",
        "agent/inbox/spliced",
        "step/start",
        "user/message",
        "request/header",
        "assistant/message",
        "step/end",
        "turn/end",
    ]
    # The model saw the user message, the system prompt; everything is durable.
    (request,) = model.requests
    assert [m.text for m in request.messages] == ["hi"]
    assert request.system == "be brief"
    assert session.durable == session.head
    assert [m.role for m in messages(session)] == ["user", "assistant"]
    # The claim is cited by the user message it delivered.
    assert events_of(session, "user/message")[0].sources == (2,)


async def test_the_request_header_records_only_what_changed(session: Session) -> None:
    model = ScriptedModel([Response(text="one"), Response(text="two")])
    agent = Agent(session, model, system="s1", params={"temperature": 0})
    agent.followup("a")
    await _run(agent)
    agent.system = "s2"
    agent.followup("b")
    await _run(agent)
    first, second = (e.data for e in events_of(session, "request/header"))
    assert (first.system, first.model, first.params) == ("s1", "scripted", {"temperature": 0})
    assert first.tools == ()
    assert (second.system, second.tools, second.model, second.params) == ("s2", None, None, None)


async def test_tools_run_and_the_next_request_sees_results_in_model_order(
    session: Session,
) -> None:
    tracker = Tracker()
    tracker.gate("call-1-0")  # the first call finishes last

    async def release_first() -> None:
        await tracker.started_event("call-1-1").wait()
        while ("finish", "call-1-1") not in tracker.log:
            await anyio.lowlevel.checkpoint()
        tracker.gate("call-1-0").set()

    model = ScriptedModel(
        [
            Response(text="Reading both.", tool_calls=[("safe", "{}"), ("safe", "{}")]),
            Response(text="Done."),
        ]
    )
    agent = Agent(session, model, _probes(tracker))
    agent.followup("go")
    async with anyio.create_task_group() as tg:
        tg.start_soon(release_first)
        assert await _run(agent) == ["completed"]
    seen = model.requests[1].messages
    assert [m.role for m in seen] == ["user", "assistant", "tool", "tool"]
    assert [m.tool_results[0].call_id for m in seen[2:]] == ["call-1-0", "call-1-1"]
    assert "tool/outcome" in _types(session)
    assert timeline(session).next_turn == 2
    assert scan(session).clean
    check_invariants(session)


async def test_max_tokens_with_tool_calls_executes_nothing(session: Session) -> None:
    tracker = Tracker()
    model = ScriptedModel(
        [Response(text="I will call", tool_calls=[("solo", "{}")], finish="max-tokens")]
    )
    agent = Agent(session, model, _probes(tracker))
    agent.followup("go")
    assert await _run(agent) == ["max-tokens"]
    assert tracker.log == []
    assert "tool/call" not in _types(session)
    (reply,) = events_of(session, "assistant/message")
    assert reply.data.interrupted and reply.data.finish == "max-tokens"
    assert reply.data.message.text == "I will call"
    assert reply.data.message.tool_calls == ()


async def test_cancel_mid_stream_keeps_the_text_and_drops_the_half_tool_call(
    session: Session,
) -> None:
    tracker = Tracker()
    reached = anyio.Event()
    # Chunks: 2 of text, then the tool call's first argument fragment; hold after it.
    model = ScriptedModel(
        [
            Response(
                text="Let me look at it.",
                tool_calls=[("solo", '{"path": "ledger.py", "long": "xxxxxxxxxxxxxxxx"}')],
                hold_after=3,
                reached=reached,
            )
        ]
    )
    agent = Agent(session, model, _probes(tracker))
    agent.followup("go")
    async with anyio.create_task_group() as tg:
        tg.start_soon(_run, agent)
        await reached.wait()
        agent.cancel()
    assert tracker.log == []
    (reply,) = events_of(session, "assistant/message")
    assert reply.data.interrupted and reply.data.finish == "canceled"
    assert reply.data.message.text == "Let me look at it."
    assert reply.data.message.tool_calls == ()
    assert events_of(session, "turn/end")[0].data.reason == "aborted"
    assert scan(session).clean
    check_invariants(session)


async def test_cancel_before_anything_visible_leaves_only_an_attempt(session: Session) -> None:
    reached = anyio.Event()
    model = ScriptedModel([Response(text="never shown", hold_after=0, reached=reached)])
    agent = Agent(session, model)
    agent.followup("go")
    async with anyio.create_task_group() as tg:
        tg.start_soon(_run, agent)
        await reached.wait()
        agent.cancel()
    assert "assistant/message" not in _types(session)
    (attempt,) = events_of(session, "assistant/attempt")
    assert attempt.data.error is None
    assert [m.role for m in messages(session)] == ["user"]


async def test_cancel_during_tools_drains_started_and_aborts_unstarted(session: Session) -> None:
    tracker = Tracker()
    tracker.gate("call-1-0")
    model = ScriptedModel([Response(tool_calls=[("solo", "{}"), ("solo", "{}")])])
    agent = Agent(session, model, _probes(tracker))
    agent.followup("go")
    async with anyio.create_task_group() as tg:
        tg.start_soon(_run, agent)
        await tracker.started_event("call-1-0").wait()
        agent.cancel()
        tracker.gate("call-1-0").set()
    results = events_of(session, "tool/result")
    assert [r.data.error.code if r.data.error else None for r in results] == [
        None,
        "ABORTED_BEFORE_DISPATCH",
    ]
    assert events_of(session, "turn/end")[0].data.reason == "aborted"
    assert scan(session).clean
    check_invariants(session)


async def test_a_failed_attempt_is_recorded_then_retried(session: Session) -> None:
    model = ScriptedModel(
        [Response(text="partial", fail_after=1, error="overloaded"), Response(text="fine")]
    )
    agent = Agent(session, model, retry=RetryPolicy(initial_delay=0))
    agent.followup("go")
    assert await _run(agent) == ["completed"]
    (attempt,) = events_of(session, "assistant/attempt")
    assert attempt.data.error == "ModelError: overloaded"
    assert [m.text for m in messages(session)] == ["go", "fine"]
    # The failed attempt comes before the retry's message, in the same step.
    assert _types(session).index("assistant/attempt") < _types(session).index("assistant/message")


async def test_retries_are_bounded_and_the_turn_ends_error(session: Session) -> None:
    model = ScriptedModel([Response(finish="error", error="boom")] * 3)
    agent = Agent(session, model, retry=RetryPolicy(max_retries=2, initial_delay=0))
    agent.followup("go")
    assert await _run(agent) == ["error"]
    assert [e.data.error for e in events_of(session, "assistant/attempt")] == ["boom"] * 3


async def test_steering_between_steps_continues_the_turn(session: Session) -> None:
    reached, release = anyio.Event(), anyio.Event()
    model = ScriptedModel(
        [
            Response(text="First answer.", hold_after=1, reached=reached, release=release),
            Response(text="Second answer, with the steer."),
        ]
    )
    agent = Agent(session, model)
    agent.followup("question")
    await _steer_while_held(agent, reached, release, "also consider this")
    (end,) = events_of(session, "turn/end")
    assert end.data.reason == "completed"
    assert [e.data.step for e in events_of(session, "step/start")] == [1, 2]
    assert [m.text for m in model.requests[1].messages] == [
        "question",
        "First answer.",
        "also consider this",
    ]


async def test_inject_waits_for_a_wake(session: Session) -> None:
    model = ScriptedModel([Response(text="ok")])
    agent = Agent(session, model)
    agent.inject("background context")
    assert await _run(agent) == []
    assert len(inbox(session).next_step) == 1
    agent.followup("now go")
    assert await _run(agent) == ["completed"]
    assert [m.text for m in model.requests[0].messages] == ["background context", "now go"]


async def test_a_concluding_tool_ends_the_turn_unless_steered(session: Session) -> None:
    tracker = Tracker()
    model = ScriptedModel(
        [
            Response(tool_calls=[("solo", '{"conclude": true}')]),
            Response(tool_calls=[("solo", '{"conclude": true}')]),
            Response(text="continued after the steer"),
        ]
    )
    agent = Agent(session, model, _probes(tracker))
    agent.followup("first")
    assert await _run(agent) == ["completed"]
    assert len(model.requests) == 1
    # Second turn: steering arrives while the concluding tool runs, so the turn goes on.
    tracker.gate("call-2-0")
    agent.followup("second")
    async with anyio.create_task_group() as tg:
        tg.start_soon(_run, agent)
        await tracker.started_event("call-2-0").wait()
        agent.steer("keep going")
        tracker.gate("call-2-0").set()
    assert len(model.requests) == 3
    assert events_of(session, "turn/end")[-1].data.reason == "completed"


async def test_max_steps_blocks_the_turn(session: Session) -> None:
    tracker = Tracker()
    model = ScriptedModel([Response(tool_calls=[("solo", "{}")])] * 2)
    agent = Agent(session, model, _probes(tracker), max_steps=2)
    agent.followup("loop")
    assert await _run(agent) == ["blocked"]
    assert scan(session).clean
    check_invariants(session)


async def test_live_observers_see_chunks_that_are_not_persisted(session: Session) -> None:
    seen: list[Chunk] = []
    agent = Agent(session, ScriptedModel([Response(text="abcdefgh", chunk_size=2)]))
    unsubscribe = agent.on_chunk(seen.append)
    agent.followup("go")
    await _run(agent)
    unsubscribe()
    assert [c.text for c in seen if isinstance(c, TextDelta)] == ["ab", "cd", "ef", "gh"]
    assert all(not e.type.startswith("assistant/chunk") for e in await session.events())


async def test_a_running_agent_refuses_a_second_turn(session: Session) -> None:
    reached, release = anyio.Event(), anyio.Event()
    model = ScriptedModel([Response(text="x", hold_after=0, reached=reached, release=release)])
    agent = Agent(session, model)
    agent.followup("go")
    async with anyio.create_task_group() as tg:
        tg.start_soon(_run, agent)
        await reached.wait()
        with pytest.raises(AgentBusyError, match="a turn is already running"):
            await agent.run_turn()
        release.set()


def _crashed_turn(session: Session) -> None:
    """A log as a crash inside a tool body leaves it: the call logged, no result."""
    session.append("turn/start", TurnStart(turn=1))
    session.append("step/start", StepStart(turn=1, step=1))
    session.append("user/message", UserMessage(message=Message.user("run it")), surface=APPEND)
    call = ToolCallPart(id="c1", name="solo", arguments="{}")
    session.append(
        "assistant/message",
        AssistantMessage(turn=1, step=1, message=Message.assistant(tool_calls=(call,))),
        surface=APPEND,
    )
    session.append("tool/call", ToolCall(turn=1, step=1, call_id="c1", name="solo", arguments="{}"))


async def test_an_open_turn_is_refused_until_repaired(session: Session) -> None:
    _crashed_turn(session)
    agent = Agent(session, ScriptedModel([]))
    with pytest.raises(OpenTurnError) as caught:
        await agent.run_turn()
    assert caught.value.message == f"session {session.id!r}: turn 1 (seq 0) is still open"


async def test_resume_repairs_continues_numbering_and_keeps_the_inbox() -> None:
    data = MemoryData()
    async with open_store("memory:", data=data) as store:
        session = await store.create(session_id="resume-me")
        _crashed_turn(session)
        Agent(session, ScriptedModel([])).inject("pending context")
        await session.flush()

    # A new process: the same stored data, no leases.
    def after_recovery(request: ModelRequest) -> Response:
        return Response(text="checked")

    model = ScriptedModel(after_recovery)
    async with open_store("memory:", data=data.restarted()) as store:
        agent = await Agent.resume(store, "resume-me", model)
        assert agent.repair_report is not None and agent.repair_report.repaired
        assert inbox(agent.session).next_step[0].message.text == "pending context"
        agent.followup("what happened?")
        assert await _run(agent) == ["completed"]
        seen = model.requests[0].messages
        # The model sees the unknown outcome, then the pending context and the new prompt.
        assert seen[2].role == "tool"
        assert seen[2].tool_results[0].is_error
        assert [m.text for m in seen[3:]] == ["pending context", "what happened?"]
        ends = events_of(agent.session, "turn/end")
        assert [(e.data.turn, e.data.reason) for e in ends] == [
            (1, "interrupted"),
            (2, "completed"),
        ]
        unknown = events_of(agent.session, "tool/result")[0].data.error
        assert unknown.code == TOOL_OUTCOME_UNKNOWN


async def test_a_duplicate_request_id_is_admitted_once_across_a_restart() -> None:
    data = MemoryData()
    async with open_store("memory:", data=data) as store:
        session = await store.create(session_id="dedupe")
        first = await prompt(session, "fix the bug", request_id="req-1")
        again = await prompt(session, "fix the bug", request_id="req-1")
        assert (first.enqueued, again.enqueued) == (True, False)
        assert again.seq == first.seq
    async with open_store("memory:", data=data.restarted()) as store:
        agent = await Agent.resume(store, "dedupe", ScriptedModel([Response(text="on it")]))
        assert await _run(agent) == ["completed"]
        # After the restart and after the prompt was claimed, the retry is still known.
        retry = await agent.prompt("fix the bug", request_id="req-1")
        assert retry.accepted and not retry.enqueued and retry.seq == first.seq
        assert len(inbox(agent.session)) == 0
        assert await _run(agent) == []
        assert len(events_of(agent.session, "turn/start")) == 1


async def test_every_request_is_sent_only_after_its_input_is_durable(session: Session) -> None:
    durable_at_request: list[bool] = []

    def script(request: ModelRequest) -> Response:
        durable_at_request.append(session.durable == session.head)
        if len(durable_at_request) == 1:
            return Response(tool_calls=[("solo", "{}")])
        return Response(text="done")

    agent = Agent(session, ScriptedModel(script), _probes(Tracker()))
    agent.followup("go")
    await _run(agent)
    assert durable_at_request == [True, True]
    check_invariants(session)


async def test_a_failed_checkpoint_answers_the_call_without_running_it() -> None:
    tracker = Tracker()
    async with FaultyStore(open_store("memory:")) as store:
        session = await store.create()

        def script(request: ModelRequest) -> Response:
            if len(request.messages) == 1:
                store.faults.fail_at = store.writes  # the flush before the tool body fails
                return Response(tool_calls=[("solo", "{}")])
            return Response(text="noted")

        agent = Agent(session, ScriptedModel(script), _probes(tracker))
        agent.followup("go")
        assert await _run(agent) == ["completed"]
        assert tracker.log == []
        (result,) = events_of(session, "tool/result")
        assert result.data.error == ToolError(name="StoreWriteError", code=CHECKPOINT_FAILED)
        assert result.data.message.tool_results[0].content.startswith(
            "the call was not run: its start could not be made durable"
        )
        assert session.durable == session.head
        check_invariants(session)


async def test_calls_are_classified_again_before_each_start(session: Session) -> None:
    tracker = Tracker()
    maybe = Probe("maybe", tracker, safe=True)

    class Flip(Probe):
        async def call(self, args: Any, context: ToolContext) -> ToolOutput:
            maybe.safe = False  # the result changes how later calls may run
            return await super().call(args, context)

    spin = '{"spins": 3}'
    model = ScriptedModel(
        [
            Response(
                tool_calls=[("maybe", spin), ("flip", "{}"), ("maybe", spin), ("maybe", spin)]
            ),
            Response(text="ok"),
        ]
    )
    agent = Agent(session, model, [maybe, Flip("flip", tracker, safe=False)])
    agent.followup("go")
    await _run(agent)
    # After the flip the two "maybe" calls are barriers: they run one after the other.
    assert tracker.log[-4:] == [
        ("start", "call-1-2"),
        ("finish", "call-1-2"),
        ("start", "call-1-3"),
        ("finish", "call-1-3"),
    ]
    assert tracker.overlaps == []


async def test_a_duplicate_request_id_is_refused_after_a_real_restart_on_sqlite(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    async with open_store(url) as store:
        session = await store.create(session_id="web")
        first = await prompt(session, "hello", request_id="client-7")
    async with open_store(url) as store:
        session = await store.open("web")
        again = await prompt(session, "hello", request_id="client-7")
        assert not again.enqueued and again.seq == first.seq
        assert len(inbox(session).next_turn) == 1
        await session.aclose()


async def test_clear_inbox_on_cancel_withdraws_pending_input(session: Session) -> None:
    agent = Agent(session, ScriptedModel([]))
    agent.followup("one")
    agent.inject("two")
    agent.cancel(clear_inbox=True)
    assert len(inbox(session)) == 0
    assert [e.data.outcome for e in events_of(session, "agent/inbox/spliced")][-2:] == [
        "canceled",
        "canceled",
    ]


async def test_max_tokens_is_sticky_when_steering_continues_the_turn(session: Session) -> None:
    reached, release = anyio.Event(), anyio.Event()
    model = ScriptedModel(
        [
            Response(
                text="cut short",
                finish="max-tokens",
                hold_after=1,
                reached=reached,
                release=release,
            ),
            Response(text="the rest"),
        ]
    )
    agent = Agent(session, model)
    agent.followup("long answer please")
    await _steer_while_held(agent, reached, release, "continue")
    assert len(model.requests) == 2
    assert events_of(session, "turn/end")[0].data.reason == "max-tokens"
    check_invariants(session)


async def test_manual_compaction_through_the_agent_needs_it_idle(session: Session) -> None:
    agent = Agent(session, ScriptedModel([Response(text="a" * 400), Response(text="b")]))
    agent.followup("x" * 400)
    await _run(agent)

    async def summarize(shadowed: Sequence[Message]) -> str:
        return "short"

    nodes = list(session.surface_index.nodes)
    result = await agent.compact(nodes[0], nodes[1], summarize)
    assert [m.source.kind for m in messages(session) if m.source] == ["compaction"]
    assert result.tokens_after < result.tokens_before
    reached, release = anyio.Event(), anyio.Event()
    agent.model = ScriptedModel(
        [Response(text="z", hold_after=0, reached=reached, release=release)]
    )
    agent.followup("again")
    async with anyio.create_task_group() as tg:
        tg.start_soon(_run, agent)
        await reached.wait()
        with pytest.raises(AgentBusyError, match="cannot compact while a turn is running"):
            await agent.compact(nodes[0], nodes[1], summarize)
        release.set()


async def test_serve_runs_a_turn_for_every_waking_submission(session: Session) -> None:
    model = ScriptedModel([Response(text="one"), Response(text="two"), Response(text="three")])
    agent = Agent(session, model)
    ended: list[anyio.Event] = [anyio.Event() for _ in range(3)]

    def on_event(event: Event) -> None:
        if event.type == "turn/end":
            ended[event.data.turn - 1].set()

    session.subscribe(on_event)
    async with anyio.create_task_group() as tg:
        await tg.start(agent.serve)
        agent.followup("first")
        await ended[0].wait()
        agent.inject("context only: no turn")
        await prompt(session, "second, from a request handler", request_id="h-1")
        await ended[1].wait()
        agent.steer("third")
        await ended[2].wait()
        tg.cancel_scope.cancel()
    assert [m.text for m in model.requests[1].messages][-2:] == [
        "context only: no turn",
        "second, from a request handler",
    ]
    assert len(events_of(session, "turn/end")) == 3
    check_invariants(session)


async def test_the_request_is_frozen_when_sent(session: Session) -> None:
    model = ScriptedModel([Response(text="one"), Response(text="two")])
    agent = Agent(session, model, params={"temperature": 0})
    agent.followup("a")
    await _run(agent)
    first = model.requests[0]
    agent.params["temperature"] = 1
    agent.followup("b")
    await _run(agent)
    # What the first request held did not move with the agent or the session.
    assert dict(first.params) == {"temperature": 0}
    assert [m.text for m in first.messages] == ["a"]
    with pytest.raises(TypeError):
        first.params["temperature"] = 2  # type: ignore[index]
