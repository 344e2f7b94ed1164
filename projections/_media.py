"""Where a media part's bytes come from, and what a converter does with a part it cannot send.

Shared by the provider converters in :mod:`projections.formats`.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Literal

from eventlog import FilePart, ImagePart, Message, ValidationError

__all__ = ("Attachments", "Degrade", "media_bytes", "media_data_url", "placeholder", "refuse")

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
