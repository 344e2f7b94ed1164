"""Events and messages as rows of text and as JSON values."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

import msgspec

from eventlog import (
    Event,
    FilePart,
    ImagePart,
    Message,
    ReasoningPart,
    RedactedReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Unknown,
)
from eventlog.stores import encode_surface

from ._sessions import fault_json

__all__ = (
    "clip",
    "counted",
    "event_json",
    "event_summary",
    "fault_json",
    "message_text",
    "payload_json",
    "timestamp",
)

_SUMMARY_WIDTH = 100


def timestamp(millis: int | None) -> str:
    """Epoch milliseconds as an ISO-8601 UTC time (``-`` for none)."""
    if millis is None:
        return "-"
    moment = dt.datetime.fromtimestamp(millis / 1000, tz=dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun``, plural unless the count is one: ``1 session``, ``0 events``
    (``plural`` when adding an ``s`` is wrong)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def clip(text: str, width: int = _SUMMARY_WIDTH) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def payload_json(data: Any) -> Any:
    """An event payload as JSON builtins; an unknown ignorable type's raw JSON, decoded."""
    if isinstance(data, Unknown):
        return msgspec.json.decode(data.raw)
    return msgspec.to_builtins(data)


def event_json(event: Event) -> dict[str, Any]:
    """One event, envelope and payload, as the ``--json`` output shows it."""
    return {
        "seq": event.seq,
        "type": event.type,
        "time": event.time,
        "surface": encode_surface(event.surface),
        "sources": list(event.sources),
        "ignorable": event.ignorable,
        "data": payload_json(event.data),
    }


def message_text(message: Message) -> str:
    """A message's parts as readable text: reasoning, text, tool calls and results."""
    pieces: list[str] = []
    for part in message.content:
        if isinstance(part, ReasoningPart):
            pieces.append(f"(reasoning) {part.text}")
        elif isinstance(part, TextPart):
            pieces.append(part.text)
        elif isinstance(part, ToolCallPart):
            pieces.append(f"→ {part.name}({part.arguments}) [{part.id}]")
        elif isinstance(part, ToolResultPart):
            marker = "error " if part.is_error else ""
            media = "" if isinstance(part.content, str) else _media_text(part.content)
            pieces.append(f"← {marker}[{part.call_id}] {part.text}{media}")
        elif isinstance(part, ImagePart | FilePart):
            pieces.append(_media_text((part,)).strip())
        elif isinstance(part, RedactedReasoningPart):
            pieces.append("(redacted reasoning)")
    return "\n".join(pieces)


def _media_text(parts: Iterable[object]) -> str:
    found = []
    for p in parts:
        if isinstance(p, ImagePart | FilePart):
            kind = "image" if isinstance(p, ImagePart) else "file"
            where = p.attachment or p.url or f"{len(p.data or b'')} bytes"
            found.append(f" ({kind} {p.media_type} {where})")
    return "".join(found)


def event_summary(event: Event) -> str:
    """One line saying what an event is about."""
    data = event.data
    if isinstance(data, Unknown):
        return clip(data.raw.decode("utf-8", "replace"))
    message = getattr(data, "message", None)
    if isinstance(message, Message):
        text = message_text(message)
        error = getattr(data, "error", None)
        if error is not None:
            text = f"{error.code}: {text}"
        context = getattr(data, "context", None)
        if isinstance(context, Message):  # what the tool added to the next request
            text = f"{text} (context: {message_text(context)})"
        return clip(f"{message.role}: {text}")
    summary = _SUMMARIES.get(event.type)
    if summary is not None:
        return clip(summary(data))
    return clip(msgspec.json.encode(data).decode())


def _header_summary(header: Any) -> str:
    """What a ``request/header`` changed (``None`` fields are unchanged, so not shown):
    ``model=gpt-5 tools=read_file,grep system=You are… params={"temperature":0}``."""
    changed = []
    if header.model is not None:
        changed.append(f"model={header.model}")
    if header.tools is not None:
        changed.append(f"tools={','.join(t.name for t in header.tools) or '(none)'}")
    if header.system is not None:
        changed.append(f"system={clip(header.system, 40)}")
    if header.params is not None:
        changed.append(f"params={msgspec.json.encode(header.params).decode()}")
    return " ".join(changed) or "nothing changed"


def _hook_summary(decision: Any) -> str:
    """An ``agent/hook`` decision: ``turn 1 step 2 before_step block: not on Fridays``."""
    text = f"turn {decision.turn} step {decision.step} {decision.hook} {decision.outcome}"
    if decision.changed:
        text += f" {','.join(decision.changed)}"
    why = decision.reason if decision.reason is not None else decision.error
    return text if why is None else f"{text}: {why}"


_SUMMARIES: dict[str, Any] = {
    "turn/start": lambda d: f"turn {d.turn}",
    "turn/end": lambda d: f"turn {d.turn} {d.reason}",
    "step/start": lambda d: f"turn {d.turn} step {d.step}",
    "step/end": lambda d: f"turn {d.turn} step {d.step}",
    "assistant/attempt": lambda d: f"turn {d.turn} step {d.step} {d.error or 'no output'}",
    "tool/call": lambda d: f"{d.name}({d.arguments}) [{d.call_id}]",
    "tool/outcome": lambda d: f"[{d.call_id}] {message_text(d.result)}",
    "request/header": lambda d: _header_summary(d),
    "agent/inbox/spliced": lambda d: (
        f"{d.target} at {d.start}: -{d.removed} +{len(d.inserted)} {d.outcome or ''}"
    ),
    "agent/hook": lambda d: _hook_summary(d),
    "compaction/start": lambda d: f"span {d.start}..{d.end} ({d.trigger})",
    "compaction/summary": lambda d: d.text,
    "compaction/end": lambda d: f"{d.outcome} checkpoint={d.checkpoint}",
    "session/forked": lambda d: f"from {d.parent} after seq {d.boundary}",
}
