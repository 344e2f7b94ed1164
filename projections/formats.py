"""Converters from provider-neutral messages to the shapes provider APIs accept.

- :func:`to_openai`: the OpenAI Chat Completions ``messages`` list.
- :func:`to_anthropic`: the Anthropic Messages API ``messages`` list.

Both are pure and total over well-formed messages (a ``user`` message carries text, an
``assistant`` message reasoning, text and tool calls, a ``tool`` message exactly one result).
Reasoning is handled per provider: Chat Completions takes no reasoning input, so it is dropped;
Anthropic takes back a ``thinking`` block only with the signature it issued, so reasoning
without one (from another provider, or unsigned) is dropped. A message left with nothing to
send is omitted. The system prompt is not a message here: it lives in ``request/header``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from eventlog import (
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ValidationError,
)

__all__ = ("to_anthropic", "to_openai", "tool_input")

_json = msgspec.json.Decoder()


def _refuse(message: Message, reason: str) -> ValidationError:
    return ValidationError(f"message {message.id!r} ({message.role}): {reason}")


def _check_parts(message: Message) -> None:
    allowed: tuple[type, ...]
    if message.role == "tool":
        if len(message.content) != 1 or not isinstance(message.content[0], ToolResultPart):
            raise _refuse(message, "a tool message must carry exactly one tool result")
        return
    allowed = (TextPart, ReasoningPart)
    if message.role == "assistant":
        allowed = (TextPart, ReasoningPart, ToolCallPart)
    for part in message.content:
        if not isinstance(part, allowed):
            kind = part.__class__.__name__
            raise _refuse(message, f"a {message.role} message cannot carry a {kind}")


# -- OpenAI Chat Completions -------------------------------------------------------------------


def to_openai(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """The OpenAI Chat Completions ``messages`` for ``messages``.

    ``user`` → ``{"role": "user", "content": str | [text parts]}``; ``assistant`` →
    ``{"role": "assistant", "content": str, "tool_calls": [{"id", "type": "function",
    "function": {"name", "arguments"}}]}`` (``tool_calls`` only when there are some);
    ``tool`` → ``{"role": "tool", "tool_call_id", "content"}``. OpenAI has no error flag on a
    tool result: the content says it.

    :raises ValidationError: a message carries a part its role cannot carry.
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        _check_parts(message)
        converted = _OPENAI[message.role](message)
        if converted is not None:
            out.append(converted)
    return out


def _openai_user(message: Message) -> dict[str, Any]:
    texts = [part.text for part in message.content if isinstance(part, TextPart)]
    content: str | list[dict[str, str]] = (
        texts[0] if len(texts) == 1 else [{"type": "text", "text": text} for text in texts]
    )
    return {"role": "user", "content": content if texts else ""}


def _openai_assistant(message: Message) -> dict[str, Any] | None:
    text = message.text
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


def _openai_tool(message: Message) -> dict[str, Any]:
    result = message.content[0]
    assert isinstance(result, ToolResultPart)  # _check_parts
    return {"role": "tool", "tool_call_id": result.call_id, "content": result.content}


_OPENAI = {"user": _openai_user, "assistant": _openai_assistant, "tool": _openai_tool}


# -- Anthropic Messages ------------------------------------------------------------------------


def to_anthropic(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """The Anthropic Messages API ``messages`` for ``messages``.

    Roles alternate as Anthropic requires: consecutive same-role messages are merged, and a tool
    message becomes a ``tool_result`` block (``tool_use_id``, ``content``, ``is_error``) of a
    ``user`` message, placed before any text of that message. Assistant parts become
    ``thinking`` (with its ``signature``), ``text`` and ``tool_use`` (``input`` parsed from the
    call's JSON arguments, see :func:`tool_input`) blocks. Empty text is never sent.

    :raises ValidationError: a message carries a part its role cannot carry.
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        _check_parts(message)
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _anthropic_blocks(message)
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


def _anthropic_blocks(message: Message) -> list[dict[str, Any]]:
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
        elif isinstance(part, ToolCallPart):
            blocks.append(
                {"type": "tool_use", "id": part.id, "name": part.name, "input": tool_input(part)}
            )
        else:
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": part.call_id,
                "is_error": part.is_error,
            }
            if part.content:
                block["content"] = part.content
            blocks.append(block)
    return blocks


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
