"""The standard agent workload shared by every benchmark.

One turn is 18 events, about 7 KiB: ``turn/start``, ``user/message``, then three steps of
``step/start``, ``assistant/message`` (one tool call), ``tool/call``, ``tool/result``,
``step/end``, and ``turn/end``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from eventlog import (
    APPEND,
    AssistantMessage,
    Message,
    Session,
    StepEnd,
    StepStart,
    ToolCall,
    ToolCallPart,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
)

__all__ = ("EVENTS_PER_TURN", "TurnEvent", "append_turn", "turn_events")

EVENTS_PER_TURN = 18
_USER = "Please fix the money comparison in ledger.py; the test still fails. " * 6
_THOUGHT = "Looking at the file and the failing test to understand the rounding issue. " * 6
_OUTPUT = "def compare(a, b):\n    return round(a, 2) == round(b, 2)\n" * 12

#: (type, payload, surface op) of one event of a turn.
TurnEvent = tuple[str, Any, Any]


def turn_events(turn: int) -> Iterator[TurnEvent]:
    """The 18 events of turn ``turn`` (payloads built fresh, ids deterministic)."""
    yield "turn/start", TurnStart(turn=turn), None
    yield "user/message", UserMessage(message=Message.user(_USER, id=f"u{turn}")), APPEND
    for step in (1, 2, 3):
        call_id = f"call-{turn}-{step}"
        arguments = '{"path": "src/ledger.py", "start": 1, "end": 200}'
        yield "step/start", StepStart(turn=turn, step=step), None
        message = Message.assistant(
            _THOUGHT,
            tool_calls=(ToolCallPart(id=call_id, name="read_file", arguments=arguments),),
            id=f"a{turn}-{step}",
        )
        yield (
            "assistant/message",
            AssistantMessage(turn=turn, step=step, message=message, finish="tool-calls"),
            APPEND,
        )
        yield (
            "tool/call",
            ToolCall(turn=turn, step=step, call_id=call_id, name="read_file", arguments=arguments),
            None,
        )
        result = Message.tool_result(call_id, _OUTPUT, id=f"r{turn}-{step}")
        yield "tool/result", ToolResult(turn=turn, step=step, message=result), APPEND
        yield "step/end", StepEnd(turn=turn, step=step), None
    yield "turn/end", TurnEnd(turn=turn, reason="completed"), None


def append_turn(session: Session, turn: int) -> None:
    """Commit one standard turn to ``session``."""
    for type_, data, surface in turn_events(turn):
        session.append(type_, data, surface=surface)
