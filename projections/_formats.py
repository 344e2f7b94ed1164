"""Converters from provider-neutral messages to the shapes provider APIs accept.

- :func:`to_openai`: the OpenAI Chat Completions ``messages`` list.
- :func:`to_anthropic`: the Anthropic Messages API ``messages`` list.
- :func:`to_openai_responses`: the OpenAI Responses API ``input`` items.

All are pure and total over well-formed messages (a ``user`` message carries text, reasoning,
images and files; an ``assistant`` message reasoning, redacted reasoning, text and tool calls; a
``tool`` message exactly one result, whose content is a string or text, image and file parts).
Reasoning is handled per provider: Chat Completions takes no reasoning input, so it is dropped;
Anthropic takes back a ``thinking`` block only with the signature it issued (and
``redacted_thinking`` verbatim), so unsigned reasoning is dropped; the Responses API takes back a
``reasoning`` item only with the id it issued, so reasoning without one is dropped. A message
left with nothing to send is omitted. The system prompt is not a message here: it lives in
``request/header``.

Images and files go inline (base64, or a ``data:`` URL) or by URL. A part that references a
stored attachment is sent with its bytes, which the caller passes as ``attachments`` (digest to
bytes; ``await store.load_attachments(history)`` gives them).

A part a provider cannot take (an image in a Chat Completions tool result or assistant message,
a file by URL or other than a PDF to Chat Completions, a media type the provider does not read)
is refused with a :class:`~eventlog.ValidationError` naming the message, the part and the
provider, unless ``degrade`` says otherwise: ``"text"`` sends a short text saying what was
there, ``"drop"`` leaves it out.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from eventlog import (
    FilePart,
    ImagePart,
    Message,
    ReasoningPart,
    RedactedReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

from ._media import (
    IMAGE_TYPES,
    MEDIA,
    Attachments,
    Conversion,
    Degrade,
    base64_text,
    check_parts,
)
from ._responses import to_openai_responses

__all__ = (
    "Attachments",
    "Degrade",
    "to_anthropic",
    "to_openai",
    "to_openai_responses",
    "tool_input",
)

_json = msgspec.json.Decoder()


# -- OpenAI Chat Completions -------------------------------------------------------------------


def to_openai(
    messages: Iterable[Message],
    *,
    attachments: Attachments | None = None,
    degrade: Degrade = "refuse",
) -> list[dict[str, Any]]:
    """The OpenAI Chat Completions ``messages`` for ``messages``.

    ``user`` → ``{"role": "user", "content": str | [parts]}`` with ``text``, ``image_url``
    (a URL or a ``data:`` URL) and ``file`` (``file_data`` as a ``data:`` URL) parts;
    ``assistant`` → ``{"role": "assistant", "content": str, "tool_calls": [{"id",
    "type": "function", "function": {"name", "arguments"}}]}`` (``tool_calls`` only when there
    are some); ``tool`` → ``{"role": "tool", "tool_call_id", "content": str | [text parts]}``.
    OpenAI has no error flag on a tool result: the content says it.

    :raises ValidationError: a message carries a part its role cannot carry, a part Chat
        Completions cannot take (with ``degrade="refuse"``), or an attachment not in
        ``attachments``.
    """
    context = Conversion("OpenAI Chat Completions", attachments, degrade)
    out: list[dict[str, Any]] = []
    for message in messages:
        check_parts(message)
        converted = _OPENAI[message.role](message, context)
        if converted is not None:
            out.append(converted)
    return out


def _openai_user(message: Message, context: Conversion) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    for part in message.content:
        if isinstance(part, TextPart):
            parts.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart) and part.media_type not in IMAGE_TYPES:
            text = context.fallback(message, part, f"of media type {part.media_type!r}")
            parts.extend(() if text is None else ({"type": "text", "text": text},))
        elif isinstance(part, ImagePart):
            parts.append({"type": "image_url", "image_url": {"url": context.url(message, part)}})
        elif isinstance(part, FilePart):
            parts.extend(_openai_file(message, part, context))
    if all(part["type"] == "text" for part in parts):
        texts = [part["text"] for part in parts]
        if len(texts) <= 1:
            return {"role": "user", "content": texts[0] if texts else ""}
    return {"role": "user", "content": parts}


def _openai_file(message: Message, part: FilePart, context: Conversion) -> list[dict[str, Any]]:
    data = context.data(message, part)
    if data is None or part.media_type != "application/pdf":
        why = "by URL (it takes file data only)" if data is None else "other than a PDF"
        text = context.fallback(message, part, why)
        return [] if text is None else [{"type": "text", "text": text}]
    file: dict[str, Any] = {"file_data": f"data:{part.media_type};base64,{base64_text(data)}"}
    file["filename"] = part.filename or "file"
    return [{"type": "file", "file": file}]


def _openai_assistant(message: Message, context: Conversion) -> dict[str, Any] | None:
    texts: list[str] = []
    for part in message.content:
        if isinstance(part, TextPart):
            texts.append(part.text)
        elif isinstance(part, MEDIA):
            text = context.fallback(message, part, "in an assistant message")
            texts.extend(() if text is None else (text,))
    text = "".join(texts)
    calls = [
        {
            "id": part.id,
            "type": "function",
            "function": {"name": part.name, "arguments": part.arguments},
        }
        for part in message.content
        if isinstance(part, ToolCallPart)
    ]
    if not text and not calls:
        return None  # only reasoning (dropped), or nothing: the API refuses an empty message
    # "" rather than null beside tool calls: OpenAI takes both, llama.cpp's server only "".
    converted: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        converted["tool_calls"] = calls
    return converted


def _openai_tool(message: Message, context: Conversion) -> dict[str, Any]:
    result = message.content[0]
    assert isinstance(result, ToolResultPart)  # _check_parts
    if isinstance(result.content, str):
        return {"role": "tool", "tool_call_id": result.call_id, "content": result.content}
    texts: list[dict[str, Any]] = []
    for part in result.content:
        text = (
            part.text
            if isinstance(part, TextPart)
            else context.fallback(message, part, "in a tool result (it takes text only)")
        )
        if text is not None:
            texts.append({"type": "text", "text": text})
    return {"role": "tool", "tool_call_id": result.call_id, "content": texts or ""}


_OPENAI = {"user": _openai_user, "assistant": _openai_assistant, "tool": _openai_tool}


# -- Anthropic Messages ------------------------------------------------------------------------


def to_anthropic(
    messages: Iterable[Message],
    *,
    attachments: Attachments | None = None,
    degrade: Degrade = "refuse",
) -> list[dict[str, Any]]:
    """The Anthropic Messages API ``messages`` for ``messages``.

    Roles alternate as Anthropic requires: consecutive same-role messages are merged, and a tool
    message becomes a ``tool_result`` block (``tool_use_id``, ``content`` as a string or text
    and image blocks, ``is_error``) of a ``user`` message, placed before any other block of that
    message. Assistant parts become ``thinking`` (with its ``signature``),
    ``redacted_thinking``, ``text`` and ``tool_use`` (``input`` parsed from the call's JSON
    arguments, see :func:`tool_input`) blocks. Images become ``image`` blocks and files
    ``document`` blocks (PDF or plain text; base64, text or URL sources). Empty text is never
    sent.

    :raises ValidationError: a message carries a part its role cannot carry, a part Anthropic
        cannot take (with ``degrade="refuse"``), or an attachment not in ``attachments``.
    """
    context = Conversion("Anthropic Messages", attachments, degrade)
    out: list[dict[str, Any]] = []
    for message in messages:
        check_parts(message)
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _anthropic_blocks(message, context)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    for converted in out:
        if converted["role"] == "user":
            # Tool results must open the user message that answers the tool calls.
            content = converted["content"]
            content.sort(key=lambda block: block["type"] != "tool_result")
    return out


def _anthropic_blocks(message: Message, context: Conversion) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.content:
        if isinstance(part, TextPart):
            if part.text:
                blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ReasoningPart):
            if part.signature:
                blocks.append(
                    {"type": "thinking", "thinking": part.text, "signature": part.signature}
                )
        elif isinstance(part, RedactedReasoningPart):
            blocks.append({"type": "redacted_thinking", "data": part.data})
        elif isinstance(part, ToolCallPart):
            blocks.append(
                {"type": "tool_use", "id": part.id, "name": part.name, "input": tool_input(part)}
            )
        elif isinstance(part, ToolResultPart):
            blocks.append(_anthropic_result(message, part, context))
        elif message.role == "assistant":
            text = context.fallback(message, part, "in an assistant message")
            blocks.extend(() if text is None else ({"type": "text", "text": text},))
        else:
            blocks.extend(_anthropic_media(message, part, context))
    return blocks


def _anthropic_result(
    message: Message, part: ToolResultPart, context: Conversion
) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": part.call_id,
        "is_error": part.is_error,
    }
    if isinstance(part.content, str):
        if part.content:
            block["content"] = part.content
        return block
    content: list[dict[str, Any]] = []
    for item in part.content:
        if isinstance(item, TextPart):
            if item.text:
                content.append({"type": "text", "text": item.text})
        else:
            content.extend(_anthropic_media(message, item, context))
    if content:
        block["content"] = content
    return block


def _anthropic_media(
    message: Message, part: ImagePart | FilePart, context: Conversion
) -> list[dict[str, Any]]:
    source = _anthropic_source(message, part, context)
    if source is None:
        where = f"of media type {part.media_type!r}"
        text = context.fallback(message, part, where)
        return [] if text is None else [{"type": "text", "text": text}]
    if isinstance(part, ImagePart):
        return [{"type": "image", "source": source}]
    block: dict[str, Any] = {"type": "document", "source": source}
    if part.filename:
        block["title"] = part.filename
    return [block]


def _anthropic_source(
    message: Message, part: ImagePart | FilePart, context: Conversion
) -> dict[str, Any] | None:
    readable = (
        part.media_type in IMAGE_TYPES
        if isinstance(part, ImagePart)
        else part.media_type in ("application/pdf", "text/plain")
    )
    if not readable:
        return None
    data = context.data(message, part)
    if data is None:
        return {"type": "url", "url": part.url}
    if part.media_type == "text/plain":
        try:
            return {"type": "text", "media_type": "text/plain", "data": data.decode()}
        except UnicodeDecodeError:
            return None
    return {"type": "base64", "media_type": part.media_type, "data": base64_text(data)}


def tool_input(call: ToolCallPart) -> dict[str, Any]:
    """A tool call's arguments as the JSON object Anthropic's ``tool_use.input`` needs.

    Blank arguments give ``{}``; arguments that are not a JSON object (malformed output of the
    model) are kept verbatim as ``{"arguments": <raw string>}`` so the model can see what it
    sent.
    """
    raw = call.arguments
    if not raw.strip():
        return {}
    try:
        value = _json.decode(raw)
    except msgspec.DecodeError:
        return {"arguments": raw}
    return value if isinstance(value, dict) else {"arguments": raw}
