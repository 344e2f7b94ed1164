"""Compaction: automatic and manual, balanced cuts, the bracket, shrinking summaries."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest

from agent import (
    Agent,
    AutoCompaction,
    CompactionError,
    Response,
    ScriptedModel,
    compact,
    estimate_tokens,
    model_summarizer,
    plan_auto,
)
from eventlog import (
    APPEND,
    AssistantMessage,
    Message,
    Replace,
    Session,
    StepEnd,
    StepStart,
    ToolCallPart,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
)
from projections import messages
from recovery.testing import check_invariants
from tests.agent_children.support import Probe, Tracker, events_of

pytestmark = pytest.mark.anyio

LONG = "word " * 80  # about 100 tokens


async def _short(shadowed: Sequence[Message]) -> str:
    return f"{len(shadowed)} messages about money comparison"


def _turn(session: Session, turn: int, *, calls: int = 0) -> None:
    """One closed turn: a long user message, then an assistant reply (with tool pairs)."""
    session.append("turn/start", TurnStart(turn=turn))
    session.append("step/start", StepStart(turn=turn, step=1))
    session.append("user/message", UserMessage(message=Message.user(LONG)), surface=APPEND)
    parts = tuple(
        ToolCallPart(id=f"t{turn}-{n}", name="read", arguments="{}") for n in range(calls)
    )
    session.append(
        "assistant/message",
        AssistantMessage(turn=turn, step=1, message=Message.assistant(LONG, tool_calls=parts)),
        surface=APPEND,
    )
    for part in parts:
        result = Message.tool_result(part.id, LONG)
        session.append("tool/result", ToolResult(turn=turn, step=1, message=result), surface=APPEND)
    session.append("step/end", StepEnd(turn=turn, step=1))
    session.append("turn/end", TurnEnd(turn=turn, reason="completed"))


async def test_automatic_compaction_replaces_the_old_span_before_a_request(
    session: Session,
) -> None:
    policy = AutoCompaction(summarizer=_short, trigger_tokens=300, retain_tokens=150)
    model = ScriptedModel([Response(text=LONG)] * 4)
    agent = Agent(session, model, compaction=policy)
    for n in range(4):
        agent.followup(f"{n}: {LONG}")
        with anyio.fail_after(10):
            await agent.run_until_idle()
    (start, *_more) = events_of(session, "compaction/start")
    assert start.data.trigger == "auto"
    end = events_of(session, "compaction/end")[0]
    assert end.data.outcome == "completed"
    checkpoint = (await session.events())[end.data.checkpoint]
    assert isinstance(checkpoint.surface, Replace)
    # The checkpoint cites the bracket start, the summary and every shadowed node.
    summary = events_of(session, "compaction/summary")[0]
    assert checkpoint.sources[:2] == (start.seq, summary.seq)
    assert set(checkpoint.sources[2:]) >= set(range(start.data.start, start.data.end + 1)) & {
        e.seq for e in await session.events() if e.surface is not None
    }
    # The model saw the checkpoint at the head of a shorter history; raw events stay.
    last = model.requests[-1].messages
    assert last[0].source is not None and last[0].source.kind == "compaction"
    assert "<compacted-summary>" in last[0].text
    assert (await session.events())[start.data.start].type == "user/message"
    check_invariants(session)


async def test_the_cut_is_rounded_toward_the_head_to_keep_tool_pairs(session: Session) -> None:
    _turn(session, 1)
    _turn(session, 2, calls=2)
    nodes = session.surface_index.nodes  # u1 a1 u2 a2(2 calls) r r
    # Retaining ~one result would cut inside turn 2's tool pairs: the cut moves to before a2.
    policy = AutoCompaction(summarizer=_short, trigger_tokens=10, retain_tokens=50)
    assert plan_auto(session, policy) == (nodes[0], nodes[2])


async def test_nothing_is_compactable_when_the_surface_is_one_tool_pair(session: Session) -> None:
    session.append("turn/start", TurnStart(turn=1))
    session.append("step/start", StepStart(turn=1, step=1))
    call = ToolCallPart(id="only", name="read", arguments="{}")
    session.append(
        "assistant/message",
        AssistantMessage(turn=1, step=1, message=Message.assistant(LONG, tool_calls=(call,))),
        surface=APPEND,
    )
    result = Message.tool_result("only", LONG)
    session.append("tool/result", ToolResult(turn=1, step=1, message=result), surface=APPEND)
    policy = AutoCompaction(summarizer=_short, trigger_tokens=10, retain_tokens=10)
    assert plan_auto(session, policy) is None


async def test_manual_compaction_of_an_explicit_span(session: Session) -> None:
    _turn(session, 1)
    _turn(session, 2, calls=1)
    _turn(session, 3)
    nodes = list(session.surface_index.nodes)
    before = len(messages(session))
    result = await compact(session, nodes[0], nodes[4], _short)
    assert result.shadowed == tuple(nodes[:5])
    assert result.tokens_after < result.tokens_before
    assert len(messages(session)) == before - 4
    assert events_of(session, "compaction/start")[0].data.trigger == "manual"
    assert [e.type for e in await session.events()][-4:] == [
        "compaction/start",
        "compaction/summary",
        "user/message",
        "compaction/end",
    ]
    check_invariants(session)


async def test_a_span_that_splits_a_tool_pair_is_refused(session: Session) -> None:
    _turn(session, 1, calls=1)
    nodes = list(session.surface_index.nodes)  # u a r
    head = session.head
    with pytest.raises(CompactionError) as caught:
        await compact(session, nodes[0], nodes[1], _short)
    assert caught.value.message == (
        f"session {session.id!r}: compaction span {nodes[0]}..{nodes[1]} would separate a tool "
        "call from its result"
    )
    assert session.head == head


async def test_manual_compaction_needs_an_idle_session(session: Session) -> None:
    _turn(session, 1)
    session.append("turn/start", TurnStart(turn=2))
    nodes = list(session.surface_index.nodes)
    with pytest.raises(CompactionError, match="needs an idle session"):
        await compact(session, nodes[0], nodes[1], _short)


async def test_a_summary_that_does_not_shrink_is_refused(session: Session) -> None:
    _turn(session, 1)
    nodes = list(session.surface_index.nodes)
    surface_before = list(nodes)

    async def verbose(shadowed: Sequence[Message]) -> str:
        return LONG * 3

    with pytest.raises(CompactionError, match="is not smaller than the span it replaces"):
        await compact(session, nodes[0], nodes[1], verbose)
    assert list(session.surface_index.nodes) == surface_before
    assert events_of(session, "compaction/end")[0].data.outcome == "aborted"
    assert events_of(session, "compaction/summary") == []


async def test_a_failing_summarizer_aborts_the_bracket(session: Session) -> None:
    _turn(session, 1)
    nodes = list(session.surface_index.nodes)

    async def broken(shadowed: Sequence[Message]) -> str:
        raise RuntimeError("no model")

    with pytest.raises(CompactionError, match="the summarizer failed: RuntimeError: no model"):
        await compact(session, nodes[0], nodes[1], broken)
    assert [e.type for e in await session.events()][-2:] == ["compaction/start", "compaction/end"]


async def test_the_model_summarizer_asks_the_model(session: Session) -> None:
    _turn(session, 1)
    nodes = list(session.surface_index.nodes)
    model = ScriptedModel([Response(text="short")])
    result = await compact(session, nodes[0], nodes[1], model_summarizer(model))
    assert model.requests[0].messages[-1].role == "user"
    assert (
        "<compacted-summary>\nshort\n"
        in (await session.events())[result.checkpoint].data.message.text
    )


def test_the_token_estimate_counts_every_part() -> None:
    call = ToolCallPart(id="x", name="read", arguments="{}")
    assert estimate_tokens(Message.user("abcd" * 10)) == 14
    assert estimate_tokens(Message.assistant(tool_calls=(call,))) == 6


async def test_compaction_works_with_tools_in_the_loop(session: Session) -> None:
    tracker = Tracker()
    policy = AutoCompaction(summarizer=_short, trigger_tokens=200, retain_tokens=60)
    model = ScriptedModel(
        [Response(text=LONG, tool_calls=[("safe", "{}")]), Response(text=LONG)] * 3
    )
    agent = Agent(session, model, [Probe("safe", tracker, safe=True)], compaction=policy)
    for n in range(3):
        agent.followup(f"{n} {LONG}")
        with anyio.fail_after(10):
            await agent.run_until_idle()
    assert events_of(session, "compaction/end")
    check_invariants(session)
