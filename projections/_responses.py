"""The OpenAI Responses API converter (``input`` items), re-exported by
:mod:`projections._formats` with the others."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from eventlog import (
    FilePart,
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

from ._media import MEDIA, Attachments, Conversion, Degrade, base64_text, check_parts

__all__ = ("to_openai_responses",)


def to_openai_responses(
    messages: Iterable[Message],
    *,
    attachments: Attachments | None = None,
    degrade: Degrade = "refuse",
) -> list[dict[str, Any]]:
    """The OpenAI Responses API ``input`` items for ``messages``.

    ``user`` → a ``message`` item with ``input_text``, ``input_image`` and ``input_file``
    content; ``assistant`` → in the order of its parts, ``reasoning`` items (only reasoning
    carrying the provider's ``id``; its ``signature`` goes back as ``encrypted_content``),
    ``message`` items with the text, and ``function_call`` items; ``tool`` →
    ``function_call_output`` (``output`` a string, or text, image and file items). The API has
    no error flag on a tool result: the content says it.

    :raises ValidationError: a message carries a part its role cannot carry, a part the
        Responses API cannot take (with ``degrade="refuse"``), or an attachment not in
        ``attachments``.
    """
    context = Conversion("OpenAI Responses", attachments, degrade)
    out: list[dict[str, Any]] = []
    for message in messages:
        check_parts(message)
        if message.role == "user":
            content = [_responses_input(message, p, context) for p in message.content]
            sent = [item for item in content if item is not None]
            if sent:
                out.append({"type": "message", "role": "user", "content": sent})
        elif message.role == "assistant":
            out.extend(_responses_assistant(message, context))
        else:
            out.append(_responses_output(message, context))
    return out


def _responses_input(message: Message, part: object, context: Conversion) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        return {"type": "input_text", "text": part.text}
    if isinstance(part, ImagePart):
        return {"type": "input_image", "image_url": context.url(message, part), "detail": "auto"}
    if isinstance(part, FilePart):
        data = context.data(message, part)
        if data is None:
            return {"type": "input_file", "file_url": part.url}
        return {
            "type": "input_file",
            "file_data": f"data:{part.media_type};base64,{base64_text(data)}",
            "filename": part.filename or "file",
        }
    return None  # reasoning in a user message: nothing the API takes as input


def _responses_assistant(message: Message, context: Conversion) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    texts: list[str] = []

    def close_text() -> None:
        if texts:
            items.append({"type": "message", "role": "assistant", "content": "".join(texts)})
            texts.clear()

    for part in message.content:
        if isinstance(part, TextPart):
            texts.extend((part.text,) if part.text else ())
        elif isinstance(part, MEDIA):
            text = context.fallback(message, part, "in an assistant message")
            texts.extend(() if text is None else (text,))
        elif isinstance(part, ReasoningPart) and part.id is not None:
            close_text()
            item: dict[str, Any] = {
                "type": "reasoning",
                "id": part.id,
                "summary": [{"type": "summary_text", "text": part.text}] if part.text else [],
            }
            if part.signature:
                item["encrypted_content"] = part.signature
            items.append(item)
        elif isinstance(part, ToolCallPart):
            close_text()
            items.append(
                {
                    "type": "function_call",
                    "call_id": part.id,
                    "name": part.name,
                    "arguments": part.arguments,
                }
            )
    close_text()
    return items


def _responses_output(message: Message, context: Conversion) -> dict[str, Any]:
    result = message.content[0]
    assert isinstance(result, ToolResultPart)  # _check_parts
    output: str | list[dict[str, Any]]
    if isinstance(result.content, str):
        output = result.content
    else:
        converted = [_responses_input(message, part, context) for part in result.content]
        output = [item for item in converted if item is not None]
    return {"type": "function_call_output", "call_id": result.call_id, "output": output}
