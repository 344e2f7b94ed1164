"""Where pydantic-ai messages go in the log: the turn and step they open and the core events
that say them.

A :class:`Cursor` is where the log stands (the open turn and step, the calls the open step
proposed and answered); :func:`plan` turns messages into the appends that log them, on a copy
of the cursor, so every payload can be checked before the first is appended.

The mapping, one model call per step:

- a ``ModelRequest`` holding a user prompt ends the open turn and opens a turn and its first
  step, with a ``user/message`` of the prompt's text;
- a ``ModelResponse`` is an ``assistant/message`` (text, thinking as reasoning, function tool
  calls), in the open step if it holds no reply yet, else in the next one;
- a tool return answering a call the open step proposed is its ``tool/result``, in the
  model's order (the request lists them so);
- each message is then spelled exactly in a ``pydantic_ai/message`` event whose sources are
  the core events above (system prompts, instructions, output-tool returns and whatever else
  the core vocabulary has no place for live only there).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from pydantic_ai.messages import (
    ERROR_OUTCOMES,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    ThinkingPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.messages import TextPart as PaiText

from eventlog import (
    APPEND,
    AssistantMessage,
    Message,
    MessageSource,
    Part,
    ReasoningPart,
    StepEnd,
    StepStart,
    SurfaceOp,
    TextPart,
    ToolCallPart,
    ToolError,
    ToolOutcome,
    ToolResult,
    TurnEnd,
    TurnStart,
    Usage,
    UserMessage,
    new_id,
)
from recovery import TOOL_ERROR, TOOL_FAILED

from ._pydantic_ai_events import MESSAGE, Spelled

__all__ = ("Append", "Cursor", "close_turn", "plan")

_MODEL = MessageSource(kind="model")
_USER = MessageSource(kind="user")


@dataclasses.dataclass(frozen=True, slots=True)
class Append:
    """One event to append: ``session.append(type, data, surface=surface, sources=sources)``."""

    type: str
    data: Any
    surface: SurfaceOp | None = None
    sources: tuple[int, ...] = ()


@dataclasses.dataclass(slots=True)
class Cursor:
    """Where the log stands: the open turn and step and what its calls reached, by call id
    (``started``: a ``tool/call`` was logged; ``outcomes``: the ``tool/outcome`` logged, whose
    error a result answering the call carries)."""

    next_seq: int
    next_turn: int
    turn: int | None = None
    step: int | None = None
    next_step: int = 1
    replied: bool = False
    proposed: dict[str, str] = dataclasses.field(default_factory=dict)
    answered: set[str] = dataclasses.field(default_factory=set)
    started: set[str] = dataclasses.field(default_factory=set)
    outcomes: dict[str, ToolOutcome] = dataclasses.field(default_factory=dict)

    def copy(self) -> Cursor:
        return dataclasses.replace(
            self,
            proposed=dict(self.proposed),
            answered=set(self.answered),
            started=set(self.started),
            outcomes=dict(self.outcomes),
        )

    def new_step(self) -> None:
        """Forget the calls of the step that ended."""
        self.replied, self.proposed, self.answered = False, {}, set()
        self.started, self.outcomes = set(), {}

    @property
    def dangling(self) -> list[str]:
        """The open step's proposed calls with no result, in the model's order."""
        return [call_id for call_id in self.proposed if call_id not in self.answered]


class _Planner:
    def __init__(self, cursor: Cursor) -> None:
        self.at = cursor
        self.appends: list[Append] = []

    def add(
        self, type_: str, data: Any, *, surface: bool = False, sources: Sequence[int] = ()
    ) -> int:
        seq = self.at.next_seq
        self.appends.append(Append(type_, data, APPEND if surface else None, tuple(sources)))
        self.at.next_seq += 1
        return seq

    def close_turn(self) -> None:
        at = self.at
        if at.step is not None:
            self.add("step/end", StepEnd(turn=at.turn or 0, step=at.step))
            at.step = None
        if at.turn is not None:
            self.add("turn/end", TurnEnd(turn=at.turn, reason="completed"))
            at.next_turn, at.next_step = at.turn + 1, 1
            at.turn = None
        at.new_step()

    def open_step(self) -> tuple[int, int]:
        at = self.at
        if at.step is not None and at.replied:
            self.add("step/end", StepEnd(turn=at.turn or 0, step=at.step))
            at.step = None
            at.new_step()
        if at.turn is None:
            self.add("turn/start", TurnStart(turn=at.next_turn))
            at.turn, at.next_step = at.next_turn, 1
        if at.step is None:
            self.add("step/start", StepStart(turn=at.turn, step=at.next_step))
            at.step, at.next_step = at.next_step, at.next_step + 1
        return at.turn, at.step

    def request(self, message: ModelRequest) -> list[int]:
        seqs: list[int] = []
        prompts = [part for part in message.parts if isinstance(part, UserPromptPart)]
        if prompts:
            self.close_turn()
            self.open_step()
            texts = [text for part in prompts for text in _texts(part)]
            if texts:
                content = tuple(TextPart(text=text) for text in texts)
                user = Message(id=new_id(), role="user", content=content, source=_USER)
                seqs.append(self.add("user/message", UserMessage(message=user), surface=True))
        at = self.at
        for part in message.parts:
            answer = _answer(part)
            if answer is None or at.step is None or at.turn is None:
                continue
            call_id, text, is_error = answer
            if call_id not in at.proposed or call_id in at.answered:
                continue  # not a call of the open step (an output tool's return, say)
            outcome = at.outcomes.get(call_id)
            error = None if outcome is None else outcome.error
            if error is None and is_error:
                code = TOOL_FAILED if getattr(part, "outcome", "") == "failed" else TOOL_ERROR
                error = ToolError(name=type(part).__name__, code=code)
            reply = Message.tool_result(call_id, text, is_error=is_error)
            data = ToolResult(turn=at.turn, step=at.step, message=reply, error=error)
            seqs.append(self.add("tool/result", data, surface=True))
            at.answered.add(call_id)
        return seqs

    def response(self, message: ModelResponse) -> list[int]:
        turn, step = self.open_step()
        parts: list[Part] = []
        for part in message.parts:
            if isinstance(part, PaiText):
                parts.append(TextPart(text=part.content))
            elif isinstance(part, ThinkingPart) and part.content:
                parts.append(ReasoningPart(text=part.content, signature=part.signature))
        calls = message.tool_calls
        parts.extend(
            ToolCallPart(
                id=call.tool_call_id, name=call.tool_name, arguments=call.args_as_json_str()
            )
            for call in calls
        )
        self.at.replied = True
        if not parts:
            return []
        for call in calls:
            self.at.proposed.setdefault(call.tool_call_id, call.tool_name)
        usage = message.usage
        data = AssistantMessage(
            turn=turn,
            step=step,
            message=Message(id=new_id(), role="assistant", content=tuple(parts), source=_MODEL),
            finish="tool-calls" if calls else "stop",
            usage=Usage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cache_read_tokens,
            ),
        )
        return [self.add("assistant/message", data, surface=True)]


def plan(
    cursor: Cursor,
    messages: Sequence[ModelMessage],
    dumped: Sequence[dict[str, Any]],
    *,
    close: bool,
) -> tuple[list[Append], Cursor]:
    """The appends logging ``messages`` (``dumped`` is each in pydantic-ai's JSON form) and the
    cursor after them; ``cursor`` is left as it is. With ``close``, the turn is closed after
    them when no call of its open step is left unanswered (a run paused on deferred calls
    keeps its turn open)."""
    planner = _Planner(cursor.copy())
    for message, spelled in zip(messages, dumped, strict=True):
        if isinstance(message, ModelResponse):
            seqs = planner.response(message)
        else:
            seqs = planner.request(message)
        planner.add(MESSAGE, Spelled(message=spelled), sources=seqs)
    if close and not planner.at.dangling:
        planner.close_turn()
    return planner.appends, planner.at


def close_turn(cursor: Cursor) -> tuple[list[Append], Cursor]:
    """The appends closing the open step and turn (none when none is open)."""
    planner = _Planner(cursor.copy())
    planner.close_turn()
    return planner.appends, planner.at


def _texts(part: UserPromptPart) -> list[str]:
    if isinstance(part.content, str):
        return [part.content]
    return [item for item in part.content if isinstance(item, str)]


def _answer(part: object) -> tuple[str, str, bool] | None:
    """``(call_id, text, is_error)`` of a part answering a function tool call, else ``None``."""
    if isinstance(part, ToolReturnPart):
        text = part.model_response_str(wrap_if_error=False)
        return part.tool_call_id, text, part.outcome in ERROR_OUTCOMES
    if isinstance(part, RetryPromptPart) and part.tool_name is not None:
        return part.tool_call_id, part.model_response(), True
    return None
