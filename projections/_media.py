"""What every provider converter shares: which parts a role may carry, where a media part's
bytes come from, and what a converter does with a part its provider cannot take.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Literal

from eventlog import (
    FilePart,
    ImagePart,
    Message,
    ReasoningPart,
    RedactedReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ValidationError,
)

__all__ = (
    "IMAGE_TYPES",
    "MEDIA",
    "REASONING",
    "Attachments",
    "Conversion",
    "Degrade",
    "base64_text",
    "check_parts",
    "media_bytes",
    "media_data_url",
    "placeholder",
    "refuse",
)

#: Digest (``"sha256:<hex>"``) to bytes, for parts that reference stored attachments.
Attachments = Mapping[str, bytes]
#: What a converter does with a part its provider cannot take.
Degrade = Literal["refuse", "text", "drop"]


def refuse(message: Message, reason: str) -> ValidationError:
    """The error for a message a converter cannot send."""
    return ValidationError(f"message {message.id!r} ({message.role}): {reason}")


def media_bytes(
    message: Message, part: ImagePart | FilePart, attachments: Attachments | None
) -> bytes | None:
    """The part's bytes: inline, or its stored attachment from ``attachments``; ``None`` for a
    part given by URL.

    :raises ValidationError: the part references an attachment ``attachments`` does not hold.
    """
    if part.data is not None:
        return part.data
    if part.attachment is None:
        return None
    found = None if attachments is None else attachments.get(part.attachment)
    if found is None:
        raise refuse(
            message,
            f"attachment {part.attachment} is not loaded; pass attachments= "
            "(await store.load_attachments(messages))",
        )
    return found


def base64_text(data: bytes) -> str:
    """``data`` as standard base64 text."""
    return base64.b64encode(data).decode("ascii")


def media_data_url(
    message: Message, part: ImagePart | FilePart, attachments: Attachments | None
) -> str:
    """The part as a URL: its own, or a ``data:`` URL holding its bytes."""
    data = media_bytes(message, part, attachments)
    if data is None:
        assert part.url is not None  # exactly one source (ImagePart.__post_init__)
        return part.url
    return f"data:{part.media_type};base64,{base64_text(data)}"


def placeholder(part: ImagePart | FilePart) -> str:
    """The text that stands for a part sent with ``degrade="text"``."""
    kind = "image" if isinstance(part, ImagePart) else "file"
    where = part.attachment or part.url or f"{len(part.data or b'')} bytes"
    name = f" {part.filename}" if isinstance(part, FilePart) and part.filename else ""
    return f"[{kind}{name}: {part.media_type}, {where}]"


def cannot(message: Message, part: object, provider: str, where: str) -> ValidationError:
    """The refusal of one part by one provider (names both, and the way out)."""
    kind = type(part).__name__
    return refuse(
        message,
        f"{provider} cannot take a {kind} {where}; pass degrade='text' or degrade='drop' "
        "to send it otherwise",
    )


MEDIA = (ImagePart, FilePart)
REASONING = (ReasoningPart, RedactedReasoningPart)
#: The image media types OpenAI and Anthropic read.
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


def check_parts(message: Message) -> None:
    """Refuse a message carrying a part its role cannot carry.

    :raises ValidationError: naming the message and the part.
    """
    allowed: tuple[type, ...]
    if message.role == "tool":
        if len(message.content) != 1 or not isinstance(message.content[0], ToolResultPart):
            raise refuse(message, "a tool message must carry exactly one tool result")
        return
    allowed = (TextPart, *REASONING, *MEDIA)
    if message.role == "assistant":
        allowed = (TextPart, *REASONING, *MEDIA, ToolCallPart)
    for part in message.content:
        if not isinstance(part, allowed):
            kind = part.__class__.__name__
            raise refuse(message, f"a {message.role} message cannot carry a {kind}")


class Conversion:
    """One conversion's options, and the refusal or degradation of a part."""

    def __init__(self, provider: str, attachments: Attachments | None, degrade: Degrade) -> None:
        self.provider = provider
        self.attachments = attachments
        self.degrade = degrade

    def fallback(self, message: Message, part: ImagePart | FilePart, where: str) -> str | None:
        """The text to send instead of ``part`` (``None``: send nothing).

        :raises ValidationError: ``degrade`` is ``"refuse"``.
        """
        if self.degrade == "refuse":
            raise cannot(message, part, self.provider, where)
        return placeholder(part) if self.degrade == "text" else None

    def data(self, message: Message, part: ImagePart | FilePart) -> bytes | None:
        """The part's bytes (``None`` for a part given by URL); see :func:`media_bytes`."""
        return media_bytes(message, part, self.attachments)

    def url(self, message: Message, part: ImagePart | FilePart) -> str:
        """The part's URL, or a ``data:`` URL of its bytes."""
        return media_data_url(message, part, self.attachments)
