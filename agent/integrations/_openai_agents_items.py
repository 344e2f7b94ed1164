"""How the OpenAI Agents session maps SDK items to core messages: which items have a core
equivalent, how consecutive items group into one event, and the parts each becomes.

Pure functions over Responses-API item dicts; no I/O, no SDK import.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from eventlog import (
    AssistantMessage,
    Message,
    Part,
    TextPart,
    ToolCallPart,
    ToolResult,
    UserMessage,
    ValidationError,
)

__all__ = (
    "assistant_parts",
    "checked",
    "core",
    "groups",
    "kind",
    "same",
    "user_parts",
)

_ASSISTANT_TYPES = frozenset({"function_call"})


def core(group: str, turn: int, step: int, message: Message) -> tuple[str, Any]:
    """The core event (type and payload) carrying ``message`` of a group of kind ``group``."""
    if group == "user":
        return "user/message", UserMessage(message=message)
    if group == "assistant":
        return "assistant/message", AssistantMessage(turn=turn, step=step, message=message)
    return "tool/result", ToolResult(turn=turn, step=step, message=message)


def checked(items: object) -> list[dict[str, Any]]:
    if not isinstance(items, list | tuple):
        raise ValidationError(f"session items must be a list, got {type(items).__name__}")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ValidationError(
                f"Expected a JSON object, got `{type(item).__name__}` - at `$[{i}]` (session items)"
            )
    return list(items)


def kind(item: dict[str, Any]) -> str:
    """``user``, ``assistant``, ``output`` (a core equivalent exists) or ``other``."""
    type_ = item.get("type", "message")
    if not isinstance(type_, str):
        return "other"
    if type_ == "message" and item.get("role") == "user" and _user_texts(item) is not None:
        return "user"
    if type_ == "message" and item.get("role") == "assistant" and _output_texts(item):
        return "assistant"
    if type_ in _ASSISTANT_TYPES and all(
        isinstance(item.get(key), str) for key in ("call_id", "name", "arguments")
    ):
        return "assistant"
    if type_ == "function_call_output" and isinstance(item.get("output"), str):
        return "output" if isinstance(item.get("call_id"), str) else "other"
    return "other"


def _user_texts(item: dict[str, Any]) -> list[str] | None:
    content = item.get("content")
    if isinstance(content, str):
        return [content]
    if (
        isinstance(content, list)
        and content
        and all(
            isinstance(c, dict) and c.get("type") == "input_text" and isinstance(c.get("text"), str)
            for c in content
        )
    ):
        return [c["text"] for c in content]
    return None


def _output_texts(item: dict[str, Any]) -> bool:
    content = item.get("content")
    return isinstance(content, list) and all(
        isinstance(c, dict) and c.get("type") == "output_text" and isinstance(c.get("text"), str)
        for c in content
    )


def user_parts(item: dict[str, Any]) -> tuple[Part, ...]:
    return tuple(TextPart(text=text) for text in _user_texts(item) or ())


def assistant_parts(group: list[dict[str, Any]]) -> tuple[Part, ...]:
    parts: list[Part] = []
    for item in group:
        if item.get("type") == "function_call":
            parts.append(
                ToolCallPart(id=item["call_id"], name=item["name"], arguments=item["arguments"])
            )
        else:
            parts.extend(TextPart(text=c["text"]) for c in item["content"])
    return tuple(parts)


def groups(items: Iterable[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Consecutive assistant items (one model reply) form one group; every other item is a
    group of its own."""
    found: list[tuple[str, list[dict[str, Any]]]] = []
    for item in items:
        of = kind(item)
        if of == "assistant" and found and found[-1][0] == "assistant":
            found[-1][1].append(item)
        else:
            found.append((of, [item]))
    return found


def same(logged: list[dict[str, Any]], added: list[dict[str, Any]]) -> bool:
    """Whether the SDK's items are the reply the hooks logged (by call ids and texts: the SDK
    may spell ids and status fields differently between the two)."""
    return [_signature(item) for item in logged] == [_signature(item) for item in added]


def _signature(item: dict[str, Any]) -> tuple[Any, ...]:
    if item.get("type") == "function_call":
        return ("function_call", item.get("call_id"), item.get("name"), item.get("arguments"))
    return ("message", tuple(c.get("text") for c in item.get("content", ())))
