"""The agent's hooks, narrated: ``before_step`` plans one step or blocks the turn,
``should_continue`` asks for another step, a tool's ``context`` reaches the next request after
the step's results in the model's order, and a hook that fails ends the turn ``error`` with the
failure recorded and nothing lost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from agent import (
    TOOL_FAILED,
    Agent,
    AgentConfigError,
    Block,
    ModelRequest,
    Response,
    ScriptedModel,
    StepContext,
    StepPlan,
    Toolbox,
    ToolOutput,
    tool,
)
from agent.report import event_summary
from eventlog import Message, MessageSource, Session, TextPart, ToolResult, open_store
from projections import inbox, messages, to_openai
from recovery.testing import check_invariants

pytestmark = pytest.mark.anyio


async def _run(agent: Agent) -> list[str]:
    with anyio.fail_after(10):
        return [outcome.reason for outcome in await agent.run_until_idle()]


def _decisions(session: Session) -> list[tuple[int, int, str, str]]:
    """Every recorded hook decision: (turn, step, hook, outcome)."""
    return [
        (e.data.turn, e.data.step, e.data.hook, e.data.outcome)
        for e in session.window()
        if e.type == "agent/hook"
    ]


def _hook_event(session: Session, n: int = 0) -> Any:
    return [e for e in session.window() if e.type == "agent/hook"][n]


def _texts(request: ModelRequest) -> list[str]:
    return [m.text or m.role for m in request.messages]


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


async def test_a_plan_changes_the_model_prompt_params_and_tools_for_its_step_only(
    session: Session,
) -> None:
    looked_up: list[str] = []

    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        looked_up.append(key)
        return f"value of {key}"

    careful = ScriptedModel([Response(tool_calls=[("lookup", '{"key": "k"}')])], name="beta")
    usual = ScriptedModel([Response(text="done")], name="alpha")

    # Step 1 is planned: another model, prompt, parameters and tool set; step 2 is not.
    def before_step(ctx: StepContext) -> StepPlan | None:
        if ctx.step == 1:
            return StepPlan(model=careful, system="be careful", params={"t": 1}, tools=[lookup])
        return None

    agent = Agent(
        session, usual, [echo], system="be brief", params={"t": 0}, before_step=before_step
    )
    agent.followup("look k up")
    assert await _run(agent) == ["completed"]

    # The planned step asked the planned model with the planned request, and its call ran
    # against the planned tools.
    (planned,) = careful.requests
    assert (planned.system, planned.model, dict(planned.params)) == ("be careful", "beta", {"t": 1})
    assert [t.name for t in planned.tools] == ["lookup"]
    assert looked_up == ["k"]
    # The next step is back to the agent's own settings, and the agent was never changed.
    (after,) = usual.requests
    assert (after.system, after.model, dict(after.params)) == ("be brief", "alpha", {"t": 0})
    assert [t.name for t in after.tools] == ["echo"]
    assert (agent.system, agent.model_name, agent.params) == ("be brief", "alpha", {"t": 0})
    assert [t.name for t in agent.toolbox] == ["echo"]
    # The log says what was decided, and each request header what the request contained.
    assert _decisions(session) == [(1, 1, "before_step", "plan"), (1, 2, "before_step", "none")]
    assert _hook_event(session).data.changed == ("model", "system", "params", "tools")
    headers = [e.data for e in session.window() if e.type == "request/header"]
    assert [h.system for h in headers] == ["be careful", "be brief"]
    check_invariants(session)


async def test_calls_run_against_the_tools_their_request_declared(session: Session) -> None:
    ran: list[str] = []

    @tool(name="act")
    def declared() -> str:
        """Act."""
        ran.append("declared")
        return "ok"

    @tool(name="act")
    def swapped() -> str:
        """Act differently."""
        ran.append("swapped")
        return "ok"

    agent: Agent

    def reply_and_swap(request: ModelRequest) -> Response:
        # While the model answers, the agent's tools are replaced.
        agent.toolbox = Toolbox([swapped])
        return Response(tool_calls=[("act", "{}")])

    model = ScriptedModel([reply_and_swap, Response(text="done")])
    agent = Agent(session, model, [declared])
    agent.followup("act")
    assert await _run(agent) == ["completed"]
    # The call ran against the set its request declared; the next step uses the new set.
    assert ran == ["declared"]
    assert [t.description for t in model.requests[1].tools] == ["Act differently."]


async def test_a_block_at_the_first_step_refuses_the_input_once(session: Session) -> None:
    seen: list[tuple[str, ...]] = []

    async def before_step(ctx: StepContext) -> Block:
        seen.append(tuple(m.text for m in ctx.inputs))
        return Block("no deployments on Fridays")

    model = ScriptedModel([])
    agent = Agent(session, model, before_step=before_step)
    agent.followup("deploy now")

    # The turn ends blocked before any request; the hook saw the input it blocked.
    assert await _run(agent) == ["blocked"]
    assert seen == [("deploy now",)]
    assert model.requests == []
    # The input is settled as refused, not left to wake the agent again, nor in the history.
    assert not inbox(session).wakes
    splices = [e for e in session.window() if e.type == "agent/inbox/spliced"]
    assert [s.data.outcome for s in splices] == [None, "refused"]
    assert list(messages(session)) == []
    block = _hook_event(session)
    assert (block.data.outcome, block.data.reason) == ("block", "no deployments on Fridays")
    assert block.sources == (splices[1].seq,)
    assert event_summary(block) == "turn 1 step 1 before_step block: no deployments on Fridays"
    types = [e.type for e in session.window()]
    assert types[-4:] == ["step/start", "agent/hook", "step/end", "turn/end"]
    # Running again finds nothing to do: no loop on the refused input.
    assert await _run(agent) == []
    assert len(seen) == 1
    check_invariants(session)


async def test_a_block_at_a_later_step_refuses_what_that_step_would_take(
    session: Session,
) -> None:
    agent: Agent

    @tool
    def remind() -> str:
        """Remind the user."""
        agent.steer("and also delete the backups")
        return "reminded"

    def before_step(ctx: StepContext) -> Block | None:
        if any("delete" in m.text for m in ctx.inputs):
            return Block("deleting backups is not allowed")
        return None

    model = ScriptedModel([Response(tool_calls=[("remind", "{}")])])
    agent = Agent(session, model, [remind], before_step=before_step)
    agent.followup("remind me")
    (outcome,) = await agent.run_until_idle()

    # Step 1 ran its tool; step 2 would have taken the steering and was blocked.
    assert (outcome.reason, outcome.steps) == ("blocked", 2)
    assert len(model.requests) == 1
    assert _decisions(session) == [(1, 1, "before_step", "none"), (1, 2, "before_step", "block")]
    assert [m.role for m in messages(session)] == ["user", "assistant", "tool"]
    assert not inbox(session).next_step
    assert await _run(agent) == []
    check_invariants(session)


async def test_should_continue_runs_another_step_until_it_says_no(session: Session) -> None:
    replies: list[str] = []

    def should_continue(ctx: StepContext) -> bool:
        assert ctx.reply is not None
        replies.append(ctx.reply.text)
        return ctx.step < 2

    model = ScriptedModel([Response(text="draft"), Response(text="final")])
    agent = Agent(session, model, should_continue=should_continue)
    agent.followup("write")
    (outcome,) = await agent.run_until_idle()

    # Asked after each step with no calls: yes after the draft, no after the final text.
    assert (outcome.reason, outcome.steps) == ("completed", 2)
    assert replies == ["draft", "final"]
    assert _texts(model.requests[1]) == ["write", "draft"]
    assert _decisions(session) == [
        (1, 1, "should_continue", "continue"),
        (1, 2, "should_continue", "stop"),
    ]
    # Each record sits inside its step, before the step's end.
    types = [e.type for e in session.window()]
    first = types.index("agent/hook")
    assert types[first - 1 : first + 2] == ["assistant/message", "agent/hook", "step/end"]
    check_invariants(session)


async def test_should_continue_is_not_asked_after_tool_calls_or_with_steering_queued(
    session: Session,
) -> None:
    asked: list[int] = []

    async def should_continue(ctx: StepContext) -> bool:
        asked.append(ctx.step)
        return False

    agent: Agent

    def steer_then_stop(request: ModelRequest) -> Response:
        agent.steer("one more thing")
        return Response(text="noted")

    calls = Response(tool_calls=[("echo", '{"text": "x"}')])
    model = ScriptedModel([calls, steer_then_stop, Response(text="all done")])
    agent = Agent(session, model, [echo], should_continue=should_continue)
    agent.followup("go")
    assert await _run(agent) == ["completed"]
    # Step 1 had calls, step 2 had steering waiting: only step 3 asked.
    assert asked == [3]


async def test_contexts_follow_the_results_in_the_models_order_and_survive_reopening(
    tmp_path: Path,
) -> None:
    slow_may_finish = anyio.Event()

    @tool(safe=True)
    async def slow() -> ToolOutput:
        """Slow."""
        await slow_may_finish.wait()
        return ToolOutput(content="slow result", context="context from slow")

    @tool(safe=True)
    async def fast() -> ToolOutput:
        """Fast."""
        slow_may_finish.set()  # the first call of the step finishes last
        note = Message(
            id="note-1",
            role="user",
            content=(TextPart(text="context from fast"),),
            source=MessageSource(kind="tool"),
        )
        return ToolOutput(content="fast result", context=note)

    url = f"sqlite:///{tmp_path / 'hooks.db'}"
    calls = [("slow", "{}"), ("fast", "{}")]
    model = ScriptedModel([Response(tool_calls=calls), Response(text="done")])
    async with open_store(url) as store:
        session = await store.create(session_id="ctx")
        agent = Agent(session, model, [slow, fast], store=store)
        agent.followup("run both")
        assert await _run(agent) == ["completed"]
        live = list(messages(session))
        # The fast call finished first: its result, context included, was made durable as
        # tool/outcome ahead of its turn.
        (outcome,) = [e for e in session.window() if e.type == "tool/outcome"]
        assert outcome.data.context is not None
        assert outcome.data.context.text == "context from fast"
        await session.aclose()

    # The next request had the results, then the contexts, in the model's order of the calls.
    assert _texts(model.requests[1]) == [
        "run both",
        "assistant",
        "tool",
        "tool",
        "context from slow",
        "context from fast",
    ]
    assert [r["role"] for r in to_openai(model.requests[1].messages)[1:]] == [
        "assistant",
        "tool",
        "tool",
        "user",
        "user",
    ]
    # Reopened from disk, the history is the same: the contexts are durable with the results.
    async with open_store(url) as store:
        session = await store.open("ctx")
        async with session:
            assert list(messages(session)) == live
            result_events = [e for e in session.window() if e.type == "tool/result"]
            assert event_summary(result_events[0]) == (
                "tool: ← [call-1-0] slow result (context: context from slow)"
            )
            results = [e.data for e in result_events]
            assert [r.context.text for r in results] == ["context from slow", "context from fast"]
            assert results[0].context.source == MessageSource(kind="tool")
            # A view of the log as it stood after the first result shows its context last.
            first = next(e for e in session.window() if e.type == "tool/result")
            assert [m.text or m.role for m in messages(session, at=first.seq)][-2:] == [
                "tool",
                "context from slow",
            ]
            check_invariants(session)


def test_a_result_written_before_contexts_existed_still_decodes() -> None:
    old = b'{"turn":1,"step":1,"message":{"id":"m","role":"tool","content":[]}}'
    assert msgspec.json.decode(old, type=ToolResult).context is None


async def test_a_context_of_the_wrong_type_fails_the_call_not_the_turn(session: Session) -> None:
    @tool
    def odd() -> ToolOutput:
        """Odd."""
        return ToolOutput(content="x", context=42)  # type: ignore[arg-type]

    model = ScriptedModel([Response(tool_calls=[("odd", "{}")]), Response(text="ok")])
    agent = Agent(session, model, [odd])
    agent.followup("go")
    assert await _run(agent) == ["completed"]
    (result,) = [e.data for e in session.window() if e.type == "tool/result"]
    assert result.error is not None and result.error.code == TOOL_FAILED
    assert "context must be a string, a user Message" in result.message.tool_results[0].text
    assert result.context is None


async def test_a_hook_that_raises_ends_the_turn_error_and_loses_nothing(
    session: Session,
) -> None:
    calls = 0

    def before_step(ctx: StepContext) -> None:
        nonlocal calls
        calls += 1
        raise ConnectionError("policy service unreachable")

    model = ScriptedModel([])
    agent = Agent(session, model, system="base", before_step=before_step)
    agent.followup("hello")
    assert await _run(agent) == ["error"]
    # The failure is recorded, naming the hook and the step; no request was sent.
    failure = _hook_event(session).data
    assert (failure.outcome, failure.error) == (
        "error",
        "before_step of turn 1, step 1 raised ConnectionError: policy service unreachable",
    )
    assert model.requests == []
    # The input is kept in the history (not lost, not left to wake the agent again).
    assert [m.text for m in messages(session)] == ["hello"]
    assert await _run(agent) == []
    assert calls == 1
    assert agent.system == "base"
    check_invariants(session)


async def test_should_continue_raising_ends_the_turn_error_after_its_reply(
    session: Session,
) -> None:
    async def should_continue(ctx: StepContext) -> bool:
        raise RuntimeError("judge crashed")

    model = ScriptedModel([Response(text="an answer")])
    agent = Agent(session, model, should_continue=should_continue)
    agent.followup("q")
    assert await _run(agent) == ["error"]
    assert _hook_event(session).data.error == (
        "should_continue of turn 1, step 1 raised RuntimeError: judge crashed"
    )
    assert [m.text for m in messages(session)] == ["q", "an answer"]
    check_invariants(session)


@pytest.mark.parametrize(
    ("hook", "answer", "error"),
    [
        (
            "before_step",
            "go ahead",
            "before_step of turn 1, step 1 returned str 'go ahead'; it must return a StepPlan, "
            "a Block or None",
        ),
        (
            "should_continue",
            1,
            "should_continue of turn 1, step 1 returned int 1; it must return True or False",
        ),
    ],
)
async def test_a_hook_answer_of_the_wrong_type_is_a_recorded_turn_error(
    session: Session, hook: str, answer: object, error: str
) -> None:
    model = ScriptedModel([Response(text="hi")])
    wrong: dict[str, Any] = {hook: lambda ctx: answer}
    agent = Agent(session, model, system="base", **wrong)
    agent.followup("hello")
    assert await _run(agent) == ["error"]
    assert _hook_event(session).data.error == error
    # Nothing else changed: the agent's settings, and no plan was applied to anything.
    assert (agent.system, agent.model_name) == ("base", "scripted")
    check_invariants(session)


async def test_a_plan_built_wrong_inside_the_hook_is_a_recorded_turn_error(
    session: Session,
) -> None:
    agent = Agent(
        session,
        ScriptedModel([]),
        before_step=lambda ctx: StepPlan(system=3),  # type: ignore[arg-type]
    )
    agent.followup("hello")
    assert await _run(agent) == ["error"]
    assert _hook_event(session).data.error == (
        "before_step of turn 1, step 1 raised AgentConfigError: StepPlan: system must be a "
        "string or None, got int 3"
    )


async def test_hooks_that_are_not_callable_are_refused_at_construction(session: Session) -> None:
    with pytest.raises(AgentConfigError, match="Agent: before_step must be a function"):
        Agent(session, ScriptedModel([]), before_step="yes")  # type: ignore[arg-type]
    with pytest.raises(AgentConfigError, match="Agent: should_continue must be a function"):
        Agent(session, ScriptedModel([]), should_continue=True)  # type: ignore[arg-type]
    with pytest.raises(AgentConfigError, match="Block: reason must be a string"):
        Block(None)  # type: ignore[arg-type]
    assert list(session.window()) == []


async def test_a_huge_failure_or_reason_is_recorded_clipped(session: Session) -> None:
    def before_step(ctx: StepContext) -> Block:
        if ctx.turn == 1:
            raise ValueError("x" * 100_000)
        return Block("y" * 100_000)

    agent = Agent(session, ScriptedModel([]), before_step=before_step)
    agent.followup("one")
    assert await _run(agent) == ["error"]
    agent.followup("two")
    assert await _run(agent) == ["blocked"]
    failure, block = (_hook_event(session, n).data for n in (0, 1))
    assert failure.error.startswith("before_step of turn 1, step 1 raised ValueError: xxx")
    assert len(failure.error) == len(block.reason) == 4000
    assert block.reason.endswith("y…")
    check_invariants(session)
