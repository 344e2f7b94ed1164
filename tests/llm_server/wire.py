"""Provider streams in each provider's documented wire format, as server-sent events.

- OpenAI Chat Completions: ``data: <chat.completion.chunk JSON>`` events, then ``data: [DONE]``;
  with ``stream_options.include_usage`` a last chunk carries ``usage`` and no choices.
- Anthropic Messages: named events ``message_start``, ``content_block_start`` /
  ``_delta`` / ``_stop``, ``message_delta`` (stop reason, cumulative output tokens),
  ``message_stop``; ``error`` for a failure inside the stream.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = (
    "anthropic_events",
    "anthropic_sse",
    "openai_chunk",
    "openai_events",
    "openai_sse",
    "pieces",
)

Event = dict[str, Any]


def pieces(text: str, size: int) -> list[str]:
    """``text`` cut into ``size``-character pieces (at least one, possibly empty)."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


# -- OpenAI ------------------------------------------------------------------------------------


def openai_chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
    model: str = "test-model",
) -> dict[str, Any]:
    """One ``chat.completion.chunk``: a choice with ``delta`` (none when only ``usage``)."""
    chunk: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": model,
        "choices": [],
    }
    if delta is not None or finish_reason is not None:
        choice = {"index": 0, "delta": delta or {}, "finish_reason": finish_reason}
        chunk["choices"] = [choice]
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def openai_sse(chunks: Sequence[dict[str, Any]], *, done: bool = True) -> list[Event]:
    """Chunks as ``data:`` events, then ``[DONE]``."""
    return [{"data": c} for c in chunks] + ([{"data": "[DONE]"}] if done else [])


def openai_events(
    *,
    text: str = "",
    reasoning: str = "",
    reasoning_key: str = "reasoning_content",
    calls: Sequence[tuple[str | None, str, str]] = (),
    finish: str | None = None,
    usage: dict[str, Any] | None = None,
    size: int = 8,
    repeat_ids: bool = False,
) -> list[Event]:
    """A whole streamed reply: reasoning, text, then each call ``(id, name, arguments)`` with
    its arguments in ``size`` pieces (``repeat_ids``: id and name on every delta, as llama.cpp
    does), the finish reason, a usage chunk when ``usage`` is given, and ``[DONE]``."""
    chunks = [openai_chunk({"role": "assistant", "content": ""})]
    chunks += [openai_chunk({reasoning_key: p}) for p in pieces(reasoning, size) if p]
    chunks += [openai_chunk({"content": p}) for p in pieces(text, size) if p]
    for index, (call_id, name, arguments) in enumerate(calls):
        for n, piece in enumerate(pieces(arguments, size)):
            first = n == 0 or repeat_ids
            call: dict[str, Any] = {"index": index, "function": {"arguments": piece}}
            if first:
                call.update(id=call_id, type="function")
                call["function"]["name"] = name
            chunks.append(openai_chunk({"tool_calls": [call]}))
    reason = finish or ("tool_calls" if calls else "stop")
    chunks.append(openai_chunk({}, finish_reason=reason))
    if usage is not None:
        chunks.append(openai_chunk(usage=usage))
    return openai_sse(chunks)


# -- Anthropic ---------------------------------------------------------------------------------


def anthropic_sse(events: Sequence[dict[str, Any]]) -> list[Event]:
    """Anthropic events (each with its ``type``) as named server-sent events."""
    return [{"event": e["type"], "data": e} for e in events]


def anthropic_events(
    *,
    text: str = "",
    thinking: tuple[str, str] | None = None,
    redacted: str | None = None,
    calls: Sequence[tuple[str, str, str]] = (),
    stop: str | None = None,
    input_tokens: int = 10,
    output_tokens: int = 5,
    cache_read: int = 0,
    size: int = 8,
    reasoning: Sequence[tuple[str, str] | str] = (),
    cache_write: int = 0,
) -> list[Event]:
    """A whole streamed message: thinking ``(text, signature)``, a redacted thinking block,
    then ``reasoning`` blocks in order (a pair is a signed thinking block, a string a redacted
    one's data), text, then each ``tool_use`` ``(id, name, input_json)`` in ``size`` pieces,
    and the stop."""
    message: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": 1,
            "cache_read_input_tokens": cache_read,
            "cache_creation_input_tokens": cache_write,
        },
    }
    out: list[dict[str, Any]] = [{"type": "message_start", "message": message}]
    index = 0

    def block(start: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
        nonlocal index
        out.append({"type": "content_block_start", "index": index, "content_block": start})
        out.extend({"type": "content_block_delta", "index": index, "delta": d} for d in deltas)
        out.append({"type": "content_block_stop", "index": index})
        index += 1

    thoughts: list[tuple[str, str] | str] = [] if thinking is None else [thinking]
    thoughts += [] if redacted is None else [redacted]
    for thought in [*thoughts, *reasoning]:
        if isinstance(thought, str):
            block({"type": "redacted_thinking", "data": thought}, [])
            continue
        said, signature = thought
        deltas = [{"type": "thinking_delta", "thinking": p} for p in pieces(said, size)]
        deltas.append({"type": "signature_delta", "signature": signature})
        block({"type": "thinking", "thinking": "", "signature": ""}, deltas)
    if text:
        block(
            {"type": "text", "text": ""},
            [{"type": "text_delta", "text": p} for p in pieces(text, size)],
        )
    for call_id, name, arguments in calls:
        block(
            {"type": "tool_use", "id": call_id, "name": name, "input": {}},
            [{"type": "input_json_delta", "partial_json": p} for p in pieces(arguments, size)],
        )
    reason = stop or ("tool_use" if calls else "end_turn")
    out.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": reason, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens},
        }
    )
    out.append({"type": "message_stop"})
    return anthropic_sse(out)
