"""The provider-neutral message model carried by surface events.

A :class:`Message` has a role and a tuple of parts. A ``tool`` message carries exactly one
:class:`ToolResultPart`. Messages are frozen: the same object may be shared by every projection.
Frozen trees of strings cannot form reference cycles, so they are not tracked by the garbage
collector (``gc=False``), which keeps collections off the load and commit paths.
"""

from __future__ import annotations

import uuid
from typing import Literal

import msgspec

__all__ = (
    "Message",
    "MessageSource",
    "Part",
    "ReasoningPart",
    "Role",
    "TextPart",
    "ToolCallPart",
    "ToolResultPart",
)

Role = Literal["user", "assistant", "tool"]
SourceKind = Literal["user", "model", "tool", "recovery", "compaction"]


class TextPart(msgspec.Struct, frozen=True, kw_only=True, tag="text", gc=False):
    """Plain text the model sees."""

    text: str


class ReasoningPart(msgspec.Struct, frozen=True, kw_only=True, tag="reasoning", gc=False):
    """The model's reasoning; ``signature`` is the provider's opaque proof, when it gives one."""

    text: str
    signature: str | None = None


class ToolCallPart(msgspec.Struct, frozen=True, kw_only=True, tag="tool-call", gc=False):
    """A tool call proposed by the model; ``arguments`` is the model's raw JSON string."""

    id: str
    name: str
    arguments: str


class ToolResultPart(msgspec.Struct, frozen=True, kw_only=True, tag="tool-result", gc=False):
    """The answer to the tool call ``call_id``."""

    call_id: str
    content: str
    is_error: bool = False


Part = TextPart | ReasoningPart | ToolCallPart | ToolResultPart


class MessageSource(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Who wrote a message; ``request_id`` identifies a user submission for de-duplication."""

    kind: SourceKind
    request_id: str | None = None


def new_id() -> str:
    """A fresh, globally unique message id."""
    return uuid.uuid4().hex


class Message(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One model-visible message."""

    id: str
    role: Role
    content: tuple[Part, ...]
    source: MessageSource | None = None

    @classmethod
    def user(cls, text: str, *, id: str | None = None, request_id: str | None = None) -> Message:
        """A user message holding one text part."""
        return cls(
            id=id or new_id(),
            role="user",
            content=(TextPart(text=text),),
            source=MessageSource(kind="user", request_id=request_id),
        )

    @classmethod
    def assistant(
        cls,
        text: str = "",
        *,
        tool_calls: tuple[ToolCallPart, ...] = (),
        reasoning: str = "",
        id: str | None = None,
    ) -> Message:
        """An assistant message: optional reasoning, optional text, then the tool calls."""
        parts: list[Part] = []
        if reasoning:
            parts.append(ReasoningPart(text=reasoning))
        if text:
            parts.append(TextPart(text=text))
        parts.extend(tool_calls)
        return cls(
            id=id or new_id(),
            role="assistant",
            content=tuple(parts),
            source=MessageSource(kind="model"),
        )

    @classmethod
    def tool_result(
        cls,
        call_id: str,
        content: str,
        *,
        is_error: bool = False,
        id: str | None = None,
        source: SourceKind = "tool",
    ) -> Message:
        """A tool message answering ``call_id``."""
        return cls(
            id=id or new_id(),
            role="tool",
            content=(ToolResultPart(call_id=call_id, content=content, is_error=is_error),),
            source=MessageSource(kind=source),
        )

    @property
    def text(self) -> str:
        """The concatenated text parts (reasoning excluded)."""
        return "".join(p.text for p in self.content if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        """The tool calls this message proposes, in the model's order."""
        return tuple(p for p in self.content if isinstance(p, ToolCallPart))

    @property
    def tool_results(self) -> tuple[ToolResultPart, ...]:
        """The tool results this message carries."""
        return tuple(p for p in self.content if isinstance(p, ToolResultPart))
