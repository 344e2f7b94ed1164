"""Mapping dsh messages onto :class:`~eventlog.Message`, and what the mapping cannot hold.

A dsh message is ``{id, role, content, source}``; content blocks are ``text``, ``reasoning``,
``tool-call``, ``tool-result`` (whose own content is a list of blocks) and ``image``. A tool
result is a ``user`` message in dsh and a ``tool`` message here. An image is a reference to an
attachment by its sha256 digest: it becomes an :class:`ImagePart` with the same reference (the
log does not hold the bytes; put them in the store with ``store.put_attachment`` to send them).
Whatever our message model cannot hold is recorded as a *loss label* (value-free, so the report
can count them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from .._message import (
    ImagePart,
    Message,
    MessageSource,
    Part,
    ReasoningPart,
    ResultPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

__all__ = ("Losses", "Unconvertible", "dsh_message", "int_field", "raw_arguments", "text_field")


class Unconvertible(Exception):
    """The payload of a core dsh type does not fit the core vocabulary (``str(exc)`` says why)."""


@dataclass(slots=True)
class Losses:
    """Loss labels collected while mapping one event."""

    labels: list[str] = field(default_factory=list)

    def extra_keys(self, where: str, value: dict[str, Any], known: frozenset[str]) -> None:
        self.labels.extend(f"{where}.{key}" for key in sorted(value.keys() - known))


# -- messages ----------------------------------------------------------------------------------


def dsh_message(
    raw: Any,
    *,
    seq: int,
    role: str,
    route: dict[str, Any] | None = None,
    n: int | None = None,
) -> tuple[Message, list[str]]:
    """Map one dsh message onto :class:`Message`; also returns the loss labels.

    :param seq: the dsh seq of the event holding the message; a message with no ``id`` (old
        snapshots) gets ``dsh-<seq>`` (``dsh-<seq>-<n>`` for the ``n``-th of a splice).
    :param role: our role for it: ``user``, ``assistant`` or ``tool`` (a dsh tool result is a
        ``user`` message).
    :param route: the current ``{provider, model}``; a model source naming exactly these is
        not a loss.
    :raises Unconvertible: the message's shape or a part's type is unknown.
    """
    if not isinstance(raw, dict) or not isinstance(raw.get("content"), list):
        raise Unconvertible("a message must be an object with a 'content' list")
    losses = Losses()
    losses.extra_keys("message", raw, frozenset({"id", "role", "content", "source"}))
    dsh_role = raw.get("role", "user" if role == "tool" else role)
    if dsh_role != ("user" if role == "tool" else role):
        raise Unconvertible(f"a {role} message has role {dsh_role!r}")
    message_id = raw.get("id")
    if not isinstance(message_id, str) or not message_id:
        message_id = f"dsh-{seq}" if n is None else f"dsh-{seq}-{n}"
    parts = tuple(_part(part, losses) for part in raw["content"])
    source = _source(raw.get("source"), parts, route or {}, losses)
    message = Message(id=message_id, role=role, content=parts, source=source)  # type: ignore[arg-type]
    return message, losses.labels


def _part(raw: Any, losses: Losses) -> Part:
    kind = raw.get("type") if isinstance(raw, dict) else None
    if kind == "text":
        losses.extra_keys("text part", raw, frozenset({"type", "text"}))
        return TextPart(text=text_field(raw, "text"))
    if kind == "reasoning":
        losses.extra_keys("reasoning part", raw, frozenset({"type", "text", "signature"}))
        signature = raw.get("signature")
        return ReasoningPart(
            text=text_field(raw, "text"),
            signature=signature if isinstance(signature, str) else None,
        )
    if kind == "tool-call":
        losses.extra_keys("tool-call part", raw, frozenset({"type", "id", "name", "arguments"}))
        return ToolCallPart(
            id=text_field(raw, "id"),
            name=text_field(raw, "name"),
            arguments=raw_arguments(raw.get("arguments"), "tool-call part.arguments", losses),
        )
    if kind == "tool-result":
        losses.extra_keys(
            "tool-result part", raw, frozenset({"type", "toolCallId", "content", "isError"})
        )
        return ToolResultPart(
            call_id=text_field(raw, "toolCallId"),
            content=_result_content(raw.get("content"), losses),
            is_error=raw.get("isError") is True,
        )
    if kind == "image":
        return _image(raw, losses)
    raise Unconvertible(f"message part type {kind!r} is not known")


def _image(raw: dict[str, Any], losses: Losses) -> ImagePart | TextPart:
    """The image as a reference to its attachment; a placeholder text when it names none."""
    losses.extra_keys("image part", raw, frozenset({"type", "attachment"}))
    attachment = raw.get("attachment")
    if not isinstance(attachment, dict):
        attachment = {}
    digest, media_type = attachment.get("attachmentId"), attachment.get("mediaType")
    if isinstance(digest, str) and isinstance(media_type, str):
        try:
            part = ImagePart(media_type=media_type, attachment=digest)
        except ValueError:
            pass  # not a sha256 reference, or not a MIME type: the placeholder below
        else:
            # Name, size and dimensions have no place in the part (dsh/original keeps them).
            known = frozenset({"attachmentId", "mediaType"})
            losses.extra_keys("image part.attachment", attachment, known)
            return part
    losses.labels.append("image part")
    return TextPart(text=_image_placeholder(raw.get("attachment")))


def _result_content(content: Any, losses: Losses) -> str | tuple[ResultPart, ...]:
    """A tool result's content blocks: one string when they are all text (joined by newlines,
    as the harness shows them), otherwise the text and image parts in order."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise Unconvertible("a tool-result block's content is neither text nor a list")
    parts: list[ResultPart] = []
    for block in content:
        part = _part(block, losses)
        if not isinstance(part, TextPart | ImagePart):
            raise Unconvertible(f"a tool-result block holds a {type(part).__name__}")
        parts.append(part)
    if all(isinstance(part, TextPart) for part in parts):
        return "\n".join(part.text for part in parts if isinstance(part, TextPart))
    return tuple(parts)


def _image_placeholder(attachment: Any) -> str:
    if not isinstance(attachment, dict):
        return "[image]"
    name = attachment.get("name") or attachment.get("attachmentId") or "unnamed"
    size = ""
    if "width" in attachment and "height" in attachment:
        size = f", {attachment['width']}x{attachment['height']}"
    return f"[image: {name}, {attachment.get('mediaType', 'unknown type')}{size}]"


def _source(
    raw: Any, parts: tuple[Part, ...], route: dict[str, Any], losses: Losses
) -> MessageSource | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise Unconvertible("a message source must be an object")
    kind = raw.get("kind")
    if kind == "user":
        losses.extra_keys("message.source", raw, frozenset({"kind", "rpcId"}))
        rpc_id = raw.get("rpcId")
        return MessageSource(kind="user", request_id=rpc_id if isinstance(rpc_id, str) else None)
    if kind == "model":
        losses.extra_keys("message.source", raw, frozenset({"kind", "provider", "model"}))
        named = {k: raw[k] for k in ("provider", "model") if k in raw}
        if named and named != {k: route[k] for k in named if k in route}:
            losses.labels.append("message.source.route")
        return MessageSource(kind="model")
    if kind == "tool":
        losses.extra_keys("message.source", raw, frozenset({"kind", "callId"}))
        call_ids = {p.call_id for p in parts if isinstance(p, ToolResultPart)}
        if "callId" in raw and {raw["callId"]} != call_ids:
            losses.labels.append("message.source.callId")
        return MessageSource(kind="tool")
    if kind == "plugin" and (raw.get("plugin") == "compact" or "compactionId" in raw):
        losses.labels.append("message.source.compaction")
        return MessageSource(kind="compaction")
    # plugin, agent-instructions, goal, skill-catalog, subagent-*: context the harness wrote.
    # Our sources have no such kind; none is better than passing it off as the human's words.
    losses.labels.append(f"message.source.kind={kind}")
    return None


def raw_arguments(raw: Any, where: str, losses: Losses) -> str:
    if isinstance(raw, str):
        return raw
    losses.labels.append(where)
    return msgspec.json.encode(raw).decode()


def int_field(data: dict[str, Any], key: str) -> int:
    value = data.get(key)
    if type(value) is not int:
        raise Unconvertible(f"{key!r} is {value!r}, not an integer")
    return value


def text_field(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise Unconvertible(f"{key!r} is {value!r}, not a string")
    return value
