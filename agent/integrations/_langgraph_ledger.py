"""What a LangGraph thread's journal says about its tool calls: folded with the saver's index.

The crash-honest tool node (:mod:`._langgraph_tools`) writes the core vocabulary into the
thread's session beside the saver's checkpoints: ``turn/start``, ``user/message``,
``step/start``, the model's reply (``assistant/message``), a ``tool/call`` before each body,
its ``tool/outcome`` after, the ``tool/result`` answers in the model's order and ``step/end``.
:class:`ToolLedger` is the fold of those events the node decides each call from; it is folded
on open and at commit with the saver's :class:`~._langgraph_index.ThreadIndex`, so it is valid
exactly as long as the thread's session is open in the saver.
"""

from __future__ import annotations

import json
from typing import Any

from eventlog import (
    APPEND,
    AssistantMessage,
    Event,
    Message,
    Session,
    StepEnd,
    StepStart,
    ToolCall,
    ToolCallPart,
    ToolOutcome,
    ToolResult,
    ToolResultPart,
    TurnEnd,
    UserMessage,
)

__all__ = ("ToolLedger", "answer", "close_step", "end_turn", "put", "text_of")

#: The model-visible messages: on the session's surface, in the model's order.
_SURFACE = frozenset({"user/message", "assistant/message", "tool/result"})


class ToolLedger:
    """The tool calls of one thread, by call id.

    :ivar step_calls: ``(turn, step)`` -> the call ids its reply proposed, in the model's order.
    :ivar call_step: call id -> the ``(turn, step)`` whose reply proposed it.
    :ivar started: call ids whose ``tool/call`` is logged (the body may have run).
    :ivar outcomes: call id -> its ``tool/outcome``.
    :ivar answered: call ids whose ``tool/result`` is logged.
    :ivar turn_key: the LangGraph id of the human message that opened the latest turn.
    """

    __slots__ = ("answered", "call_step", "outcomes", "started", "step_calls", "turn_key")

    def __init__(self) -> None:
        self.step_calls: dict[tuple[int, int], list[str]] = {}
        self.call_step: dict[str, tuple[int, int]] = {}
        self.started: set[str] = set()
        self.outcomes: dict[str, ToolOutcome] = {}
        self.answered: set[str] = set()
        self.turn_key: str | None = None

    def apply(self, event: Event) -> None:
        """Fold one event (others are ignored)."""
        data = event.data
        if isinstance(data, AssistantMessage):
            ids = [p.id for p in data.message.content if isinstance(p, ToolCallPart)]
            self.step_calls[(data.turn, data.step)] = ids
            for call_id in ids:
                self.call_step[call_id] = (data.turn, data.step)
        elif isinstance(data, ToolCall):
            self.started.add(data.call_id)
        elif isinstance(data, ToolOutcome):
            self.outcomes[data.call_id] = data
        elif isinstance(data, ToolResult):
            for part in data.message.content:
                if isinstance(part, ToolResultPart):
                    self.answered.add(part.call_id)
        elif isinstance(data, UserMessage) and data.message.source is not None:
            self.turn_key = data.message.source.request_id

    def unanswered(self, at: tuple[int, int]) -> list[str]:
        """The calls of step ``at`` with an outcome and no ``tool/result`` yet, model's order."""
        return [
            c for c in self.step_calls.get(at, []) if c in self.outcomes and c not in self.answered
        ]

    def settled(self, at: tuple[int, int]) -> bool:
        """Every call step ``at`` proposed has its outcome."""
        return all(c in self.outcomes for c in self.step_calls.get(at, []))


def put(session: Session, ledger: ToolLedger, type_: str, data: Any) -> None:
    """Append one event (model-visible ones on the surface) and fold it into ``ledger``."""
    surface = APPEND if type_ in _SURFACE else None
    ledger.apply(session.append(type_, data, surface=surface))


def close_step(session: Session, ledger: ToolLedger) -> None:
    """End the open step, if any: the answers its calls have, in the model's order, then
    ``step/end`` (a call that never ran keeps no answer)."""
    grammar = session.grammar
    if grammar.turn is None or grammar.step is None:
        return
    turn, step = grammar.turn, grammar.step
    answer(session, ledger, (turn, step))
    put(session, ledger, "step/end", StepEnd(turn=turn, step=step))


def answer(session: Session, ledger: ToolLedger, at: tuple[int, int]) -> None:
    """Log the ``tool/result`` of each call of step ``at`` with an outcome and no answer yet,
    in the model's order."""
    turn, step = at
    for call_id in ledger.unanswered(at):
        o = ledger.outcomes[call_id]
        put(
            session,
            ledger,
            "tool/result",
            ToolResult(turn=turn, step=step, message=o.result, error=o.error),
        )


def end_turn(session: Session, ledger: ToolLedger, last: Any) -> None:
    """End the open turn when ``last`` (a checkpoint's latest message) is the model's answer:
    a LangGraph ``AIMessage`` without tool calls, logged as the turn's last step. Anything
    else (no turn open, a reply with calls, a tool message) leaves the log as it is."""
    turn = session.grammar.turn
    if turn is None or getattr(last, "type", None) != "ai" or getattr(last, "tool_calls", None):
        return
    close_step(session, ledger)
    step = session.grammar.last_step + 1
    put(session, ledger, "step/start", StepStart(turn=turn, step=step))
    message = Message.assistant(text_of(getattr(last, "content", "")))
    put(
        session,
        ledger,
        "assistant/message",
        AssistantMessage(turn=turn, step=step, message=message),
    )
    put(session, ledger, "step/end", StepEnd(turn=turn, step=step))
    put(session, ledger, "turn/end", TurnEnd(turn=turn, reason="completed"))


def text_of(content: Any) -> str:
    """A LangChain message content as text (a list's text blocks joined)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p if isinstance(p, str) else str(p.get("text", ""))
            for p in content
            if isinstance(p, str | dict)
        )
    return json.dumps(content, default=repr)
