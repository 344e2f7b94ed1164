"""The provider-neutral message model carried by surface events.

A :class:`Message` has a role and a tuple of parts (a list given where a tuple is declared is
the same JSON: ``append`` commits it as the tuple). A ``tool`` message carries exactly one
:class:`ToolResultPart`, whose content is a string or a sequence of text, image and file parts.
An :class:`ImagePart` or :class:`FilePart` holds its bytes inline, a URL, or a reference to an
attachment stored once in the store (``"sha256:<hex>"``, see :func:`attachment_digest`).
Messages are frozen: the same object may be shared by every projection. Frozen trees of strings
cannot form reference cycles, so they are not tracked by the garbage collector (``gc=False``),
which keeps collections off the load and commit paths.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Sequence
from typing import Literal

import msgspec

from ._errors import ValidationError

__all__ = (
    "FilePart",
    "ImagePart",
    "Message",
    "MessageSource",
    "Part",
    "ReasoningPart",
    "RedactedReasoningPart",
    "ResultPart",
    "Role",
    "TextPart",
    "ToolCallPart",
    "ToolResultPart",
    "attachment_digest",
    "SourceKind",
    "new_id",
)

Role = Literal["user", "assistant", "tool"]
SourceKind = Literal["user", "model", "tool", "recovery", "compaction"]


class TextPart(msgspec.Struct, frozen=True, kw_only=True, tag="text", gc=False):
    """Plain text the model sees."""

    text: str


class ReasoningPart(msgspec.Struct, frozen=True, kw_only=True, tag="reasoning", gc=False):
    """The model's reasoning; ``signature`` is the provider's opaque proof, when it gives one
    (Anthropic's thinking signature, OpenAI's encrypted reasoning content), and ``id`` the
    provider's id of the reasoning item (OpenAI Responses), when it gives one. Both are sent back
    verbatim."""

    text: str
    signature: str | None = None
    id: str | None = None


class RedactedReasoningPart(
    msgspec.Struct, frozen=True, kw_only=True, tag="redacted-reasoning", gc=False
):
    """Reasoning the provider returned encrypted (Anthropic ``redacted_thinking``): opaque
    ``data`` that is kept and sent back to that provider unchanged, never shown."""

    data: str


_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def attachment_digest(data: bytes | bytearray | memoryview) -> str:
    """The content address of ``data``: ``"sha256:"`` followed by 64 lowercase hex digits.

    :raises ValidationError: ``data`` is not bytes, a bytearray or a memoryview.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ValidationError(
            f"attachment_digest: data must be bytes (or a bytearray or memoryview), got "
            f"{type(data).__name__}"
        )
    return "sha256:" + hashlib.sha256(data).hexdigest()


class _Media(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Binary content by exactly one of: inline ``data``, a ``url``, or the digest of a stored
    ``attachment``. ``media_type`` is its MIME type (``image/png``, ``application/pdf``).

    :raises ValueError: (a ``ValidationError`` when decoded or committed) not exactly one
        source, or a malformed digest.
    """

    media_type: str
    data: bytes | None = None
    url: str | None = None
    attachment: str | None = None

    def __post_init__(self) -> None:
        _check_types(self)
        given = [name for name in ("data", "url", "attachment") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(
                f"{type(self).__name__} needs exactly one of data, url or attachment, "
                f"got {given or 'none'}"
            )
        if self.attachment is not None and not _DIGEST.match(self.attachment):
            raise ValueError(
                f"{type(self).__name__}.attachment must be 'sha256:' and 64 lowercase hex "
                f"digits, got {self.attachment!r}"
            )
        if "/" not in self.media_type:
            raise ValueError(f"media_type {self.media_type!r} is not a MIME type")


#: The type each field of a :class:`_Media` must have (``None`` aside, for the optional ones).
_MEDIA_TYPES: dict[str, type] = {
    "media_type": str,
    "data": bytes,
    "url": str,
    "attachment": str,
}


def _check_types(part: _Media) -> None:
    """Refuse a field of the wrong type (a part built in code, not decoded: msgspec checks
    those), before any check that would raise ``TypeError`` on it."""
    for name, expected in _MEDIA_TYPES.items():
        value = getattr(part, name)
        if (value is not None or name == "media_type") and not isinstance(value, expected):
            raise ValidationError(
                f"{type(part).__name__}.{name} must be {expected.__name__}, got "
                f"{type(value).__name__}"
            )


class ImagePart(_Media, frozen=True, kw_only=True, tag="image", gc=False):
    """An image the model sees (see :class:`_Media` for where its bytes are)."""


class FilePart(_Media, frozen=True, kw_only=True, tag="file", gc=False):
    """A document the model reads (a PDF, a text file); ``filename`` is shown to providers that
    take one."""

    filename: str | None = None


#: What a tool result's content may hold when it is not a plain string.
ResultPart = TextPart | ImagePart | FilePart


class ToolCallPart(msgspec.Struct, frozen=True, kw_only=True, tag="tool-call", gc=False):
    """A tool call proposed by the model; ``arguments`` is the model's raw JSON string."""

    id: str
    name: str
    arguments: str


class ToolResultPart(msgspec.Struct, frozen=True, kw_only=True, tag="tool-result", gc=False):
    """The answer to the tool call ``call_id``: a string, or text, image and file parts."""

    call_id: str
    content: str | tuple[ResultPart, ...]
    is_error: bool = False

    @property
    def text(self) -> str:
        """The result's text: the string, or its text parts joined (media left out)."""
        if isinstance(self.content, str):
            return self.content
        return "".join(p.text for p in self.content if isinstance(p, TextPart))


Part = (
    TextPart
    | ReasoningPart
    | RedactedReasoningPart
    | ImagePart
    | FilePart
    | ToolCallPart
    | ToolResultPart
)


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
        tool_calls: Sequence[ToolCallPart] = (),
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
        content: str | Sequence[ResultPart],
        *,
        is_error: bool = False,
        id: str | None = None,
        source: SourceKind = "tool",
    ) -> Message:
        """A tool message answering ``call_id``; ``content`` parts in a list are kept as the
        declared tuple."""
        parts = content if isinstance(content, str) else tuple(content)
        return cls(
            id=id or new_id(),
            role="tool",
            content=(ToolResultPart(call_id=call_id, content=parts, is_error=is_error),),
            source=MessageSource(kind=source),
        )

    @property
    def text(self) -> str:
        """The concatenated text parts (reasoning excluded)."""
        return "".join(p.text for p in self.content if isinstance(p, TextPart))

    @property
    def attachments(self) -> tuple[str, ...]:
        """The digests of the stored attachments this message references, in order."""
        found: list[str] = []
        for part in self.content:
            if isinstance(part, ImagePart | FilePart):
                if part.attachment is not None:
                    found.append(part.attachment)
            elif isinstance(part, ToolResultPart) and not isinstance(part.content, str):
                found.extend(
                    p.attachment
                    for p in part.content
                    if isinstance(p, ImagePart | FilePart) and p.attachment is not None
                )
        return tuple(found)

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        """The tool calls this message proposes, in the model's order."""
        return tuple(p for p in self.content if isinstance(p, ToolCallPart))

    @property
    def tool_results(self) -> tuple[ToolResultPart, ...]:
        """The tool results this message carries."""
        return tuple(p for p in self.content if isinstance(p, ToolResultPart))
