"""Mapping dsh event payloads onto the core vocabulary.

dsh writes camelCase payloads whose messages carry their own ``{id, role, content, source}``; a
tool result is a ``user`` message with one ``tool-result`` block. Each converter returns the
payload of our vocabulary plus a list of *losses*: short, value-free labels of what the core
payload cannot hold (a plugin message source, an image part, ``tool/result.meta``, ...). The
importer keeps the original data of a lossy event in a ``dsh/original`` extension event, so
nothing is dropped; the labels are counted in the report.

Converters are deterministic: the same line always yields the same payload (message ids missing
from old snapshots are derived from the dsh seq), so importing a prefix of a log yields a prefix
of the events of importing the whole log.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast, get_args

import msgspec

from .._message import Message
from .._vocabulary import (
    AssistantMessage,
    FinishReason,
    InboxItem,
    InboxSpliced,
    RequestHeader,
    StepEnd,
    StepStart,
    ToolCall,
    ToolError,
    ToolResult,
    ToolSpec,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    Usage,
    UserMessage,
)
from ._dsh_messages import (
    Losses,
    Unconvertible,
    dsh_message,
    int_field,
    raw_arguments,
    text_field,
)

__all__ = ("Converted", "Converter")

_TURN_END_REASONS = frozenset(get_args(TurnEndReason))
_USAGE_FIELDS = {
    "inputTokens": "input_tokens",
    "outputTokens": "output_tokens",
    "cacheReadTokens": "cache_read_tokens",
    "reasoningTokens": "reasoning_tokens",
}


@dataclass(frozen=True, slots=True)
class Converted:
    """A dsh event mapped onto the vocabulary: our type, payload and what could not be kept."""

    type: str
    payload: Any
    losses: tuple[str, ...] = ()


class Converter:
    """Maps dsh events onto the vocabulary, one at a time, in log order.

    Stateful only in one respect: it remembers the current provider and model (from
    ``request/header`` and ``request/context``) so that a model message source naming exactly
    those is not counted as a loss.
    """

    def __init__(self) -> None:
        self._route: dict[str, Any] = {}
        self._converters: dict[str, Callable[[Any, int], Converted]] = {
            "turn/start": self._turn_start,
            "turn/end": self._turn_end,
            "step/start": self._step("step/start", StepStart),
            "step/end": self._step("step/end", StepEnd),
            "user/message": self._user_message,
            "assistant/message": self._assistant_message,
            "tool/call": self._tool_call,
            "tool/result": self._tool_result,
            "agent/inbox/spliced": self._inbox_spliced,
            "request/header": self._request_header,
        }

    def maps(self, type_: str) -> bool:
        """True when ``type_`` maps onto a core type (others are kept as extensions)."""
        return type_ in self._converters

    def convert(self, type_: str, data: Any, seq: int) -> Converted:
        """Map one dsh event (``seq`` is its dsh seq).

        :raises Unconvertible: the payload does not fit the core type.
        """
        if not isinstance(data, dict):
            raise Unconvertible(f"'data' is not an object but {type(data).__name__}")
        try:
            return self._converters[type_](data, seq)
        except RecursionError:
            # Read, but too deep to map (far past what a payload may nest): kept as it is.
            raise Unconvertible(f"the {type_!r} payload nests too deep to map") from None
        except (KeyError, TypeError, AttributeError, msgspec.ValidationError) as exc:
            raise Unconvertible(f"unexpected {type_!r} payload: {exc!r}") from exc

    def observe(self, type_: str, data: Any) -> None:
        """Follow ``request/context``, which stays an extension, for the current route."""
        if type_ == "request/context" and isinstance(data, dict):
            self._route = {k: data[k] for k in ("provider", "model") if k in data}

    # -- turns and steps -----------------------------------------------------------------------

    def _turn_start(self, data: dict[str, Any], seq: int) -> Converted:
        losses = Losses()
        losses.extra_keys("turn/start", data, frozenset({"turn"}))
        return Converted(
            "turn/start", TurnStart(turn=int_field(data, "turn")), tuple(losses.labels)
        )

    def _turn_end(self, data: dict[str, Any], seq: int) -> Converted:
        losses = Losses()
        losses.extra_keys("turn/end", data, frozenset({"turn", "reason"}))
        reason = data.get("reason")
        kind = reason.get("kind") if isinstance(reason, dict) else reason
        if kind not in _TURN_END_REASONS:
            raise Unconvertible(f"turn/end reason {reason!r} is not one of the known kinds")
        if isinstance(reason, dict):
            losses.extra_keys("turn/end.reason", reason, frozenset({"kind"}))
        payload = TurnEnd(turn=int_field(data, "turn"), reason=cast(TurnEndReason, kind))
        return Converted("turn/end", payload, tuple(losses.labels))

    @staticmethod
    def _step(type_: str, cls: type[StepStart] | type[StepEnd]) -> Callable[[Any, int], Converted]:
        def convert(data: dict[str, Any], seq: int) -> Converted:
            losses = Losses()
            losses.extra_keys(type_, data, frozenset({"turn", "step"}))
            payload = cls(turn=int_field(data, "turn"), step=int_field(data, "step"))
            return Converted(type_, payload, tuple(losses.labels))

        return convert

    # -- surface events ------------------------------------------------------------------------

    def _user_message(self, data: dict[str, Any], seq: int) -> Converted:
        message, labels = dsh_message(data, seq=seq, role="user", route=self._route)
        return Converted("user/message", UserMessage(message=message), tuple(labels))

    def _assistant_message(self, data: dict[str, Any], seq: int) -> Converted:
        losses = Losses()
        if "message" in data:
            losses.extra_keys(
                "assistant/message",
                data,
                frozenset({"turn", "step", "message", "usage", "interrupted"}),
            )
            message, labels = dsh_message(
                data["message"], seq=seq, role="assistant", route=self._route
            )
        else:  # the older shape: the message's fields inline, provenance beside them
            losses.extra_keys(
                "assistant/message",
                data,
                frozenset({"turn", "step", "content", "provenance", "usage", "interrupted"}),
            )
            inline = {"role": "assistant", "content": data["content"]}
            if isinstance(data.get("provenance"), dict):
                inline["source"] = {"kind": "model", **data["provenance"]}
            message, labels = dsh_message(inline, seq=seq, role="assistant", route=self._route)
        losses.labels.extend(labels)
        usage = _usage(data.get("usage"), losses)
        interrupted = data.get("interrupted") is True
        payload = AssistantMessage(
            turn=int_field(data, "turn"),
            step=int_field(data, "step"),
            message=message,
            finish=_finish(data, message, interrupted),
            usage=usage,
            interrupted=interrupted,
        )
        return Converted("assistant/message", payload, tuple(losses.labels))

    def _tool_call(self, data: dict[str, Any], seq: int) -> Converted:
        losses = Losses()
        losses.extra_keys(
            "tool/call", data, frozenset({"turn", "step", "callId", "name", "arguments"})
        )
        payload = ToolCall(
            turn=int_field(data, "turn"),
            step=int_field(data, "step"),
            call_id=text_field(data, "callId"),
            name=text_field(data, "name"),
            arguments=raw_arguments(data.get("arguments"), "tool/call.arguments", losses),
        )
        return Converted("tool/call", payload, tuple(losses.labels))

    def _tool_result(self, data: dict[str, Any], seq: int) -> Converted:
        losses = Losses()
        if "message" in data:
            losses.extra_keys("tool/result", data, frozenset({"turn", "step", "message", "error"}))
            raw = data["message"]
        else:  # the older shape {turn, step, callId, content, isError}: no message wrapper
            losses.extra_keys(
                "tool/result", data, frozenset({"turn", "step", "callId", "content", "isError"})
            )
            raw = {
                "role": "user",
                "source": {"kind": "tool", "callId": data["callId"]},
                "content": [
                    {
                        "type": "tool-result",
                        "toolCallId": data["callId"],
                        "content": data["content"],
                        "isError": data.get("isError", False),
                    }
                ],
            }
        message, labels = dsh_message(raw, seq=seq, role="tool", route=self._route)
        losses.labels.extend(labels)
        if len(message.content) != 1 or not message.tool_results:
            raise Unconvertible("a tool/result message must hold exactly one tool-result block")
        payload = ToolResult(
            turn=int_field(data, "turn"),
            step=int_field(data, "step"),
            message=message,
            error=_tool_error(data.get("error"), losses),
        )
        return Converted("tool/result", payload, tuple(losses.labels))

    # -- log-only events -----------------------------------------------------------------------

    def _inbox_spliced(self, data: dict[str, Any], seq: int) -> Converted:
        losses = Losses()
        losses.extra_keys(
            "agent/inbox/spliced",
            data,
            frozenset({"target", "start", "removedCount", "inserted", "outcome"}),
        )
        items = []
        for index, raw in enumerate(data.get("inserted") or ()):
            # Inserted messages of one splice share the splice's seq: tell them apart.
            message, labels = dsh_message(raw, seq=seq, role="user", route=self._route, n=index)
            losses.labels.extend(labels)
            request_id = message.source.request_id if message.source is not None else None
            items.append(InboxItem(id=message.id, message=message, request_id=request_id))
        removed = data.get("removedCount") or 0
        outcome = data.get("outcome")
        if outcome is None and removed:
            outcome = "claimed"  # dsh marks only cancellations; a bare removal is a claim
        # Literal fields (target, outcome) are checked when the event is committed.
        payload = InboxSpliced(
            target=data["target"],
            start=int_field(data, "start") if "start" in data else 0,
            removed=removed,
            inserted=tuple(items),
            outcome=outcome,
        )
        return Converted("agent/inbox/spliced", payload, tuple(losses.labels))

    def _request_header(self, data: dict[str, Any], seq: int) -> Converted:
        losses = Losses()
        losses.extra_keys("request/header", data, frozenset({"header"}))
        header = data["header"]
        losses.extra_keys("request/header.header", header, frozenset({"config", "system", "tools"}))
        config = dict(header.get("config") or {})
        self._route = {k: config[k] for k in ("provider", "model") if k in config}
        model = config.pop("model", None)
        system = header.get("system")
        if system is not None and not isinstance(system, str):
            losses.labels.append("request/header.header.system")
            system = None
        payload = RequestHeader(
            system=system,
            tools=_tools(header.get("tools"), losses),
            model=model if isinstance(model, str) else None,
            params=config or None,
        )
        return Converted("request/header", payload, tuple(losses.labels))


# -- small field helpers -----------------------------------------------------------------------


def _usage(raw: Any, losses: Losses) -> Usage | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise Unconvertible("usage is not an object")
    losses.extra_keys("usage", raw, frozenset(_USAGE_FIELDS))
    return Usage(**{ours: raw[theirs] for theirs, ours in _USAGE_FIELDS.items() if theirs in raw})


def _finish(data: dict[str, Any], message: Message, interrupted: bool) -> FinishReason:
    """dsh records no finish reason; infer it from what the settled message shows."""
    if interrupted:
        return "canceled"
    source = data.get("message", {}).get("source") if "message" in data else None
    replay = source.get("replayState") if isinstance(source, dict) else None
    response = replay.get("response") if isinstance(replay, dict) else None
    if isinstance(response, dict) and response.get("stopReason") == "length":
        return "max-tokens"
    return "tool-calls" if message.tool_calls else "stop"


def _tool_error(raw: Any, losses: Losses) -> ToolError | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise Unconvertible("tool/result error is not an object")
    losses.extra_keys("tool/result.error", raw, frozenset({"name", "code"}))
    return ToolError(name=text_field(raw, "name"), code=text_field(raw, "code"))


def _tools(raw: Any, losses: Losses) -> tuple[ToolSpec, ...] | None:
    if raw is None:
        return None
    if isinstance(raw, list) and all(isinstance(t, dict) and "name" in t for t in raw):
        for tool in raw:
            losses.extra_keys("tool spec", tool, frozenset({"name", "description", "parameters"}))
        return tuple(msgspec.convert(tool, ToolSpec) for tool in raw)
    losses.labels.append("request/header.header.tools")  # e.g. a snapshot's "{{tools}}"
    return None
