"""Compaction: replace an old, balanced span of the surface with a smaller summary.

Compaction is a surface operation: raw events stay in the log; a checkpoint ``user/message``
with ``Replace(start, end)`` takes the place of the shadowed nodes on the surface, its
``sources`` citing the bracket start, the summary and every shadowed node. The bracket is::

    compaction/start {start, end, trigger} → compaction/summary {text}
        → user/message (Replace) → compaction/end {completed, checkpoint}

or ``compaction/end {aborted}`` when the summarizer fails, the span changed meanwhile, or the
summary would not be smaller than what it replaces (then the surface is untouched).

Automatic compaction keeps the newest ``retain_tokens`` and cuts the rest; the cut is rounded
toward the head until it is balanced (never between a tool call and its result). Manual
compaction takes an explicit span and needs an idle session.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from eventlog import (
    CompactionEnd,
    CompactionStart,
    CompactionSummary,
    Message,
    MessageSource,
    ReasoningPart,
    Replace,
    Session,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    UserMessage,
    new_id,
)
from projections import timeline

from ._checks import check_callable, check_count, check_str
from ._errors import CompactionError
from ._model import Finish, Model, ModelError, ModelRequest, TextDelta, check_model

__all__ = (
    "AutoCompaction",
    "CompactionResult",
    "Summarizer",
    "compact",
    "compact_auto",
    "estimate_tokens",
    "model_summarizer",
    "plan_auto",
    "PREAMBLE",
)

logger = logging.getLogger("agent.compaction")

#: ``await summarizer(messages)`` returns the summary text of ``messages``.
Summarizer = Callable[[Sequence[Message]], Awaitable[str]]

PREAMBLE = (
    "This is an automatically generated checkpoint that condenses the earlier conversation. "
    "Treat it as established background and continue directly, without acknowledging it.\n"
)


def estimate_tokens(message: Message) -> int:
    """A provider-neutral token estimate: about four characters a token, plus framing."""
    chars = 0
    for part in message.content:
        if isinstance(part, TextPart | ReasoningPart):
            chars += len(part.text)
        elif isinstance(part, ToolCallPart):
            chars += len(part.name) + len(part.arguments)
        elif isinstance(part, ToolResultPart):
            chars += len(part.text)
    return 4 + (chars + 3) // 4


@dataclass(frozen=True)
class AutoCompaction:
    """When and how the agent compacts by itself (checked before each model request).

    :ivar trigger_tokens: compact when the surface is priced above this.
    :ivar retain_tokens: keep at least this many of the newest tokens.
    :raises AgentConfigError: an argument of the wrong type or out of range.
    """

    summarizer: Summarizer
    trigger_tokens: int
    retain_tokens: int
    count_tokens: Callable[[Message], int] = estimate_tokens

    def __post_init__(self) -> None:
        where = "AutoCompaction"
        check_callable(where, "summarizer", self.summarizer, "an async function of messages")
        check_count(where, "trigger_tokens", self.trigger_tokens, 0)
        check_count(where, "retain_tokens", self.retain_tokens, 0)
        check_callable(where, "count_tokens", self.count_tokens, "a function of a message")


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """A completed compaction: the checkpoint's seq and the token price before and after."""

    checkpoint: int
    shadowed: tuple[int, ...]
    tokens_before: int
    tokens_after: int


def _surface(session: Session) -> tuple[list[int], list[Message]]:
    nodes = list(session.surface_index.nodes)
    event = session.window().event  # the surface's events are always held
    return nodes, [event(seq).data.message for seq in nodes]


def plan_auto(session: Session, policy: AutoCompaction) -> tuple[int, int] | None:
    """The span automatic compaction would replace now, or ``None``."""
    nodes, msgs = _surface(session)
    prices = [policy.count_tokens(m) for m in msgs]
    if sum(prices) <= policy.trigger_tokens:
        return None
    cut, kept = len(nodes), 0
    while cut > 0 and kept < policy.retain_tokens:
        cut -= 1
        kept += prices[cut]
    index = session.surface_index
    while cut > 0 and index.balance_before(cut) != 0:
        cut -= 1  # toward the head: never separate a tool call from its result
    if cut == 0:
        return None
    if cut == 1 and _is_checkpoint(msgs[0]):
        return None  # only the previous checkpoint: nothing new to condense
    return nodes[0], nodes[cut - 1]


def _is_checkpoint(message: Message) -> bool:
    return message.source is not None and message.source.kind == "compaction"


async def compact_auto(session: Session, policy: AutoCompaction) -> CompactionResult | None:
    """Compact if the surface is over budget; a failed compaction is logged, not raised."""
    span = plan_auto(session, policy)
    if span is None:
        return None
    try:
        return await _compact(session, *span, policy.summarizer, policy.count_tokens, "auto")
    except CompactionError as exc:
        logger.warning("agent: automatic compaction of %r skipped: %s", session.id, exc)
        return None


async def compact(
    session: Session,
    start: int,
    end: int,
    summarizer: Summarizer,
    *,
    count_tokens: Callable[[Message], int] = estimate_tokens,
) -> CompactionResult:
    """Replace the surface span ``[start, end]`` (seqs of current nodes) by a summary.

    :raises CompactionError: a turn is open, the span is not a balanced run of current
        nodes, the surface changed while summarizing, the summarizer failed, or the summary is
        not smaller than the span (the bracket is closed ``aborted``; the surface is untouched).
    """
    if timeline(session).turn is not None:
        raise CompactionError(
            f"session {session.id!r}: manual compaction needs an idle session (a turn is open)",
            session_id=session.id,
        )
    return await _compact(session, start, end, summarizer, count_tokens, "manual")


def _check_span(session: Session, start: int, end: int) -> tuple[int, ...]:
    index = session.surface_index
    first, last = index.position(start), index.position(end)
    where = f"session {session.id!r}: compaction span {start}..{end}"
    if first is None or last is None or first > last:
        raise CompactionError(
            f"{where} is not a run of current surface nodes", session_id=session.id
        )
    if index.balance_before(first) != 0 or index.balance_before(last + 1) != 0:
        raise CompactionError(
            f"{where} would separate a tool call from its result", session_id=session.id
        )
    return tuple(index.nodes[first : last + 1])


async def _compact(
    session: Session,
    start: int,
    end: int,
    summarizer: Summarizer,
    count_tokens: Callable[[Message], int],
    trigger: str,
) -> CompactionResult:
    shadowed = _check_span(session, start, end)
    event = session.window().event  # the surface's events are always held
    shadowed_messages = [event(seq).data.message for seq in shadowed]
    before = sum(count_tokens(m) for m in shadowed_messages)
    opened = session.append(
        "compaction/start",
        CompactionStart(start=start, end=end, trigger="auto" if trigger == "auto" else "manual"),
    )
    try:
        text = await _summarize(session, summarizer, shadowed_messages)
        if _check_span(session, start, end) != shadowed:
            raise CompactionError(
                f"session {session.id!r}: the surface changed while summarizing",
                session_id=session.id,
            )
        checkpoint = Message(
            id=new_id(),
            role="user",
            content=(
                TextPart(text=f"{PREAMBLE}<compacted-summary>\n{text}\n</compacted-summary>"),
            ),
            source=MessageSource(kind="compaction"),
        )
        after = count_tokens(checkpoint)
        if after >= before:
            raise CompactionError(
                f"session {session.id!r}: the summary ({after} tokens) is not smaller than "
                f"the span it replaces ({before} tokens)",
                session_id=session.id,
            )
    except BaseException:
        session.append("compaction/end", CompactionEnd(outcome="aborted"))
        raise
    summary = session.append("compaction/summary", CompactionSummary(text=text))
    placed = session.append(
        "user/message",
        UserMessage(message=checkpoint),
        surface=Replace(start, end),
        sources=(opened.seq, summary.seq, *shadowed),
    )
    session.append("compaction/end", CompactionEnd(outcome="completed", checkpoint=placed.seq))
    return CompactionResult(placed.seq, shadowed, before, after)


async def _summarize(session: Session, summarizer: Summarizer, shadowed: list[Message]) -> str:
    try:
        return await summarizer(shadowed)
    except Exception as exc:
        raise CompactionError(
            f"session {session.id!r}: the summarizer failed: {type(exc).__name__}: {exc}",
            session_id=session.id,
        ) from exc


def model_summarizer(
    model: Model,
    instruction: str = "Summarize the conversation above for your own later use: the goal, "
    "what was done, what was found, and what remains. Be brief.",
) -> Summarizer:
    """A :data:`Summarizer` that asks ``model`` (the shadowed messages, then ``instruction``).

    :raises ModelError: (from the summarizer) the model failed or did not finish with ``stop``.
    :raises AgentConfigError: ``model`` is not a :class:`Model` or ``instruction`` not a string.
    """
    check_model("model_summarizer", model)
    check_str("model_summarizer", "instruction", instruction)

    async def summarize(shadowed: Sequence[Message]) -> str:
        request = ModelRequest(messages=(*shadowed, Message.user(instruction)), model=model.name)
        pieces: list[str] = []
        finish: Finish | None = None
        async for chunk in model.stream(request):
            if isinstance(chunk, TextDelta):
                pieces.append(chunk.text)
            elif isinstance(chunk, Finish):
                finish = chunk
                break
        if finish is None or finish.kind != "stop":
            raise ModelError(f"summary request did not finish normally: {finish}")
        return "".join(pieces)

    return summarize
