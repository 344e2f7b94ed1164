"""Stream assembly: chunks in, one settled assistant reply out.

The assembler keeps blocks in stream order: text and reasoning runs, redacted reasoning, and
tool calls by index. A signature closes its reasoning run: consecutive thinking blocks stay
separate parts, each with its own signature, so each can be sent back as it came. Redacted
reasoning is a part of its own (:class:`~eventlog.RedactedReasoningPart`), kept verbatim.
How a reply settles depends on how the stream ended:

- a normal finish (``stop`` or ``tool-calls``) keeps every block; its tool calls may run;
- a ``max-tokens`` finish or a cancel drops every tool call, complete or half-streamed (running
  one would need a fabricated result), and keeps the non-blank text and reasoning, marked
  interrupted;
- when nothing model-visible is left, there is no message: the attempt is log-only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import get_args

from eventlog import (
    Message,
    MessageSource,
    Part,
    ReasoningPart,
    RedactedReasoningPart,
    TextPart,
    ToolCallPart,
    Usage,
)

from ._checks import described
from ._model import Chunk, Finish, FinishKind, ModelError, ReasoningDelta, TextDelta, ToolCallDelta

__all__ = ("Assembler", "Reply")


@dataclass
class _Run:
    kind: str  # "text" or "reasoning"
    pieces: list[str] = field(default_factory=list)
    signature: str | None = None

    def part(self) -> Part:
        text = "".join(self.pieces)
        if self.kind == "text":
            return TextPart(text=text)
        return ReasoningPart(text=text, signature=self.signature)

    def visible(self) -> bool:
        # A signed block is kept even when its text is blank (a provider may omit the
        # thinking text): the provider needs it back to continue the turn.
        return self.signature is not None or any(piece.strip() for piece in self.pieces)


@dataclass
class _Redacted:
    data: str

    def part(self) -> Part:
        return RedactedReasoningPart(data=self.data)

    def visible(self) -> bool:
        return True


@dataclass
class _Call:
    index: int
    id: str | None = None
    name: str | None = None
    pieces: list[str] = field(default_factory=list)

    def part(self, fallback_id: str) -> ToolCallPart:
        return ToolCallPart(id=self.id or fallback_id, name=self.name or "", arguments=self.args)

    @property
    def args(self) -> str:
        return "".join(self.pieces)


@dataclass(frozen=True, slots=True)
class Reply:
    """A settled reply. ``message`` is ``None`` when nothing model-visible was produced."""

    message: Message | None
    finish: Finish | None
    interrupted: bool

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        """The tool calls to execute (empty unless the stream finished normally)."""
        return self.message.tool_calls if self.message is not None else ()


class Assembler:
    """Collects one attempt's chunks. Feed with :meth:`feed`, settle with :meth:`settle`.

    :param message_id: the id the settled message gets.
    """

    def __init__(self, message_id: str) -> None:
        self.message_id = message_id
        self._blocks: list[_Run | _Redacted | _Call] = []
        self._calls: dict[int, _Call] = {}
        self.finish: Finish | None = None

    def feed(self, chunk: Chunk) -> None:
        """Add one chunk; a chunk after the finish is ignored.

        :raises ModelError: (not retryable) ``chunk`` is not a chunk, or one with fields of the
            wrong type (msgspec does not check them when it is built): the model broke the
            :class:`~agent.Model` contract, and the attempt fails saying how.
        """
        if self.finish is not None:
            return
        why = _malformed(chunk)
        if why is not None:
            raise ModelError(f"the model yielded {described(chunk)}: {why}", retryable=False)
        if isinstance(chunk, TextDelta | ReasoningDelta):
            self._run(chunk)
        elif isinstance(chunk, ToolCallDelta):
            self._call(chunk)
        else:
            self.finish = chunk

    def _run(self, chunk: TextDelta | ReasoningDelta) -> None:
        if isinstance(chunk, ReasoningDelta) and chunk.redacted is not None:
            self._blocks.append(_Redacted(chunk.redacted))
            return
        kind = "text" if isinstance(chunk, TextDelta) else "reasoning"
        last = self._blocks[-1] if self._blocks else None
        if not isinstance(last, _Run) or last.kind != kind or last.signature is not None:
            last = _Run(kind)
            self._blocks.append(last)
        last.pieces.append(chunk.text)
        if isinstance(chunk, ReasoningDelta) and chunk.signature is not None:
            last.signature = chunk.signature

    def _call(self, chunk: ToolCallDelta) -> None:
        call = self._calls.get(chunk.index)
        if call is None:
            call = self._calls[chunk.index] = _Call(chunk.index)
            self._blocks.append(call)
        if chunk.id:
            call.id = chunk.id
        if chunk.name:
            call.name = chunk.name
        if chunk.arguments:
            call.pieces.append(chunk.arguments)

    @property
    def usage(self) -> Usage | None:
        """The usage reported by the finish, if any."""
        return self.finish.usage if self.finish is not None else None

    def settle(self, *, cancelled: bool = False) -> Reply:
        """The reply as it stands: complete after a normal finish, else interrupted.

        A failed stream (error finish, or no finish without a cancel) settles with no message:
        a failed attempt is never shown to the model.
        """
        finish = self.finish
        if finish is not None and finish.kind in ("stop", "tool-calls") and not cancelled:
            return Reply(self._message(keep_calls=True), finish, interrupted=False)
        if cancelled or (finish is not None and finish.kind == "max-tokens"):
            return Reply(self._message(keep_calls=False), finish, interrupted=True)
        return Reply(None, finish, interrupted=False)

    def _message(self, *, keep_calls: bool) -> Message | None:
        parts: list[Part] = []
        ids: set[str] = set()
        for n, block in enumerate(self._blocks):
            if isinstance(block, _Call):
                if keep_calls:
                    part = block.part(f"{self.message_id}-call-{n}")
                    if part.id in ids:  # a provider repeated an id: results must stay paired
                        part = ToolCallPart(
                            id=f"{part.id}-{n}", name=part.name, arguments=part.arguments
                        )
                    ids.add(part.id)
                    parts.append(part)
            elif block.visible():
                parts.append(block.part())
        if not any(_visible(part) for part in parts):
            return None
        return Message(
            id=self.message_id,
            role="assistant",
            content=tuple(parts),
            source=MessageSource(kind="model"),
        )


_FINISH_KINDS = frozenset(get_args(FinishKind))


def _malformed(chunk: object) -> str | None:
    """What is wrong with ``chunk`` as a chunk, or ``None``."""
    if isinstance(chunk, TextDelta):
        ok = isinstance(chunk.text, str)
    elif isinstance(chunk, ReasoningDelta):
        ok = isinstance(chunk.text, str) and all(
            v is None or isinstance(v, str) for v in (chunk.signature, chunk.redacted)
        )
    elif isinstance(chunk, ToolCallDelta):
        ok = (
            type(chunk.index) is int
            and isinstance(chunk.arguments, str)
            and all(v is None or isinstance(v, str) for v in (chunk.id, chunk.name))
        )
    elif isinstance(chunk, Finish):
        ok = (
            chunk.kind in _FINISH_KINDS
            and (chunk.usage is None or isinstance(chunk.usage, Usage))
            and (chunk.error is None or isinstance(chunk.error, str))
        )
    else:
        return "not a chunk (TextDelta, ReasoningDelta, ToolCallDelta or Finish)"
    return None if ok else "a field of the wrong type"


def _visible(part: Part) -> bool:
    if isinstance(part, TextPart | ReasoningPart):
        return bool(part.text.strip())
    return True
