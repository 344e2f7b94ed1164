"""Events to OpenTelemetry spans, mapped to the GenAI semantic conventions
(:data:`SEMCONV_VERSION`).

One builder consumes events in seq order, whether read back from the store (export) or as they
are committed (the live observer), so both give the same trace:

- a turn is an ``invoke_agent`` span (the root);
- each model request is a ``chat {model}`` child with ``gen_ai.request.model``, the usage and
  ``gen_ai.response.finish_reasons``; a failed attempt is one too, with error status;
- each tool call is an ``execute_tool {name}`` child, from its ``tool/call`` (or its answer, if
  it never started) to its ``tool/result``;
- a result's error code, including recovery's ``TOOL_OUTCOME_UNKNOWN`` and ``TOOL_NOT_STARTED``,
  gives error status with ``error.type`` set to the code; an interrupted turn gives
  ``error.type = interrupted``;
- each decision a call waited for is an ``await_approval {name}`` child, from its
  ``tool/approval-request`` to its ``tool/approval``, with ``eventlog.approval.decision``,
  ``.by``, ``.reason`` and ``.policy_reason`` and the seqs of both events; the tool's own span
  carries the decision and who made it too (a pending one stays open: ``eventlog.open``);
- ``gen_ai.conversation.id`` is the session id on every span, and every span carries the seqs
  that prove it (``eventlog.seq.start``, ``eventlog.seq.end``, ``eventlog.seqs.*``).

Message content is opt-in (``include_content``): ``gen_ai.input.messages``,
``gen_ai.output.messages`` and ``gen_ai.system_instructions`` as JSON in the conventions'
``parts`` schema, and ``gen_ai.tool.call.arguments`` / ``gen_ai.tool.call.result``.
"""

from __future__ import annotations

from typing import Any

import msgspec
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from eventlog import (
    Event,
    Message,
    ReasoningPart,
    Session,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from projections import MessagesView, messages

from ..report import FAILED_FATES, result_fate

__all__ = ("SCHEMA_URL", "SEMCONV_VERSION", "SpanBuilder", "message_parts")

#: The GenAI semantic conventions version the attributes follow (pinned: they are still
#: marked "development" and change between versions).
SEMCONV_VERSION = "1.37.0"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"

#: Fates reported with error status (``error.type`` = the result's code).
_ERROR_FATES = FAILED_FATES | {"outcome unknown", "not started"}
#: Our finish reasons as the conventions spell them.
_FINISH = {
    "stop": "stop",
    "tool-calls": "tool_call",
    "max-tokens": "length",
    "error": "error",
    "canceled": "cancelled",
}
_NS = 1_000_000  # event times are epoch milliseconds; spans take nanoseconds
_json = msgspec.json.Encoder()


def message_parts(message: Message) -> dict[str, Any]:
    """A message in the conventions' ``parts`` schema: ``{"role", "parts": [...]}``."""
    parts: list[dict[str, Any]] = []
    for part in message.content:
        if isinstance(part, TextPart):
            parts.append({"type": "text", "content": part.text})
        elif isinstance(part, ReasoningPart):
            parts.append({"type": "reasoning", "content": part.text})
        elif isinstance(part, ToolCallPart):
            parts.append(
                {"type": "tool_call", "id": part.id, "name": part.name, "arguments": part.arguments}
            )
        elif isinstance(part, ToolResultPart):
            parts.append(
                {"type": "tool_call_response", "id": part.call_id, "response": part.content}
            )
    return {"role": message.role, "parts": parts}


class SpanBuilder:
    """Turns one session's events, fed in seq order, into spans on ``tracer``.

    :param session: the session the events are of (its id is ``gen_ai.conversation.id``; with
        ``include_content``, what each request saw is read from it).
    :param include_content: also record message content (off by default: it may be private).
    :param agent_name: ``gen_ai.agent.name`` and the suffix of ``invoke_agent`` span names.
    """

    def __init__(
        self,
        tracer: Tracer,
        session: Session,
        *,
        include_content: bool = False,
        agent_name: str | None = None,
    ) -> None:
        self._tracer = tracer
        self._session = session
        self._sid = session.id
        self._content = include_content
        self._agent = agent_name
        self._turn: Span | None = None
        self._request_from: Event | None = None
        # The model-visible messages when the request went out, captured live (see _request).
        self._request_messages: MessagesView | None = None
        self._model: str | None = None
        self._system: str | None = None
        self._proposed: dict[tuple[int, int, str], str] = {}
        self._tools: dict[tuple[int, int, str], tuple[Span, int]] = {}
        self._answered: set[tuple[int, int, str]] = set()
        # Calls waiting for a decision: their await_approval span; and each decision's
        # attributes, set on the tool's span when it starts.
        self._asking: dict[tuple[int, int, str], Span] = {}
        self._decided: dict[tuple[int, int, str], dict[str, Any]] = {}
        self.last_time = 0

    # -- feeding -------------------------------------------------------------------------------

    def feed(self, event: Event) -> None:
        """Take the next event (seq order). Never raises for an event it does not map."""
        self.last_time = event.time
        handler = _HANDLERS.get(event.type)
        if handler is not None:
            handler(self, event)

    def close(self, end_time: int | None = None) -> None:
        """End every span still open (a crashed or live run) at ``end_time`` (ms; default the
        last event's time), marked ``eventlog.open = true``."""
        at = (end_time if end_time is not None else self.last_time) * _NS
        for span in [*(span for span, _ in self._tools.values()), *self._asking.values()]:
            span.set_attribute("eventlog.open", True)
            span.end(end_time=at)
        self._tools.clear()
        self._asking.clear()
        if self._turn is not None:
            self._turn.set_attribute("eventlog.open", True)
            self._turn.end(end_time=at)
            self._turn = None

    # -- the mapping ---------------------------------------------------------------------------

    def _attrs(self, operation: str, event: Event, **more: Any) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": operation,
            "gen_ai.conversation.id": self._sid,
            "eventlog.seq.start": event.seq,
        }
        if self._agent:
            attrs["gen_ai.agent.name"] = self._agent
        attrs.update({k: v for k, v in more.items() if v is not None})
        return attrs

    def _child(self, name: str, kind: SpanKind, start: Event, attrs: dict[str, Any]) -> Span:
        context = trace.set_span_in_context(self._turn) if self._turn is not None else None
        return self._tracer.start_span(
            name, context=context, kind=kind, attributes=attrs, start_time=start.time * _NS
        )

    def _header(self, event: Event) -> None:
        if event.data.model is not None:
            self._model = event.data.model
        if event.data.system is not None:
            self._system = event.data.system

    def _turn_start(self, event: Event) -> None:
        self.close(event.time)  # a turn left open (a log with findings) ends where this begins
        name = f"invoke_agent {self._agent}" if self._agent else "invoke_agent"
        attrs = self._attrs("invoke_agent", event, **{"eventlog.turn": event.data.turn})
        self._turn = self._tracer.start_span(
            name, kind=SpanKind.INTERNAL, attributes=attrs, start_time=event.time * _NS
        )

    def _turn_end(self, event: Event) -> None:
        if self._turn is None:
            return
        reason = event.data.reason
        self._turn.set_attribute("eventlog.turn.reason", reason)
        self._turn.set_attribute("eventlog.seq.end", event.seq)
        if reason in ("interrupted", "error"):
            self._turn.set_attribute("error.type", reason)
            self._turn.set_status(Status(StatusCode.ERROR, f"turn ended: {reason}"))
        self._turn.end(end_time=event.time * _NS)
        self._turn = None

    def _step_start(self, event: Event) -> None:
        self._request(event)

    def _request(self, event: Event) -> None:
        """The model request goes out after ``event``. Fed live (the event is the session's
        head: a commit observer), the messages it sent are the session's messages now, O(1),
        and held whatever the session later drops from memory; fed from a stored log, they are
        folded up to ``event`` when the reply comes."""
        self._request_from = event
        live = self._content and self._session.head == event.seq
        self._request_messages = messages(self._session) if live else None

    def _reply(self, event: Event) -> None:
        start = self._request_from or event
        data = event.data
        attrs = self._attrs(
            "chat",
            start,
            **{
                "gen_ai.request.model": self._model,
                "eventlog.turn": data.turn,
                "eventlog.step": data.step,
                "eventlog.seq.end": event.seq,
            },
        )
        span = self._child(
            f"chat {self._model}" if self._model else "chat", SpanKind.CLIENT, start, attrs
        )
        if event.type == "assistant/attempt":
            if data.error is not None:
                kind = data.error.partition(":")[0].strip() or "error"
                span.set_attribute("error.type", kind)
                span.set_status(Status(StatusCode.ERROR, data.error))
        else:
            span.set_attribute(
                "gen_ai.response.finish_reasons", [_FINISH.get(data.finish, data.finish)]
            )
            if data.usage is not None:
                span.set_attribute("gen_ai.usage.input_tokens", data.usage.input_tokens)
                span.set_attribute("gen_ai.usage.output_tokens", data.usage.output_tokens)
            for part in data.message.tool_calls:
                self._proposed[(data.turn, data.step, part.id)] = part.name
            if self._content:
                output = dict(
                    message_parts(data.message), finish_reason=_FINISH.get(data.finish, data.finish)
                )
                span.set_attribute("gen_ai.output.messages", _json.encode([output]).decode())
        if self._content:
            seen = self._request_messages
            if seen is None:
                seen = messages(self._session, at=start.seq)
            history = [message_parts(m) for m in seen]
            span.set_attribute("gen_ai.input.messages", _json.encode(history).decode())
            if self._system:
                system = [{"type": "text", "content": self._system}]
                span.set_attribute("gen_ai.system_instructions", _json.encode(system).decode())
        span.end(end_time=event.time * _NS)
        self._request(event)  # a retry's request goes out after the failed attempt

    def _tool_call(self, event: Event) -> None:
        data = event.data
        key = (data.turn, data.step, data.call_id)
        attrs = self._attrs(
            "execute_tool",
            event,
            **{
                "gen_ai.tool.name": data.name,
                "gen_ai.tool.call.id": data.call_id,
                "gen_ai.tool.type": "function",
                "eventlog.turn": data.turn,
                "eventlog.step": data.step,
                "eventlog.seqs.call": event.seq,
                "gen_ai.tool.call.arguments": data.arguments if self._content else None,
            },
        )
        attrs.update(self._decided.get(key, {}))
        span = self._child(f"execute_tool {data.name}", SpanKind.INTERNAL, event, attrs)
        self._tools[key] = (span, event.seq)

    def _approval_request(self, event: Event) -> None:
        data = event.data
        attrs = self._attrs(
            "await_approval",
            event,
            **{
                "gen_ai.tool.name": data.name,
                "gen_ai.tool.call.id": data.call_id,
                "eventlog.turn": data.turn,
                "eventlog.step": data.step,
                "eventlog.seqs.requested": event.seq,
                "eventlog.approval.policy_reason": data.reason or None,
            },
        )
        span = self._child(f"await_approval {data.name}", SpanKind.INTERNAL, event, attrs)
        self._asking[(data.turn, data.step, data.call_id)] = span

    def _approval(self, event: Event) -> None:
        data = event.data
        key = (data.turn, data.step, data.call_id)
        decided = {
            "eventlog.approval.decision": data.decision,
            "eventlog.approval.by": data.by,
            "eventlog.seqs.decided": event.seq,
        }
        if data.reason:
            decided["eventlog.approval.reason"] = data.reason
        self._decided[key] = decided
        span = self._asking.pop(key, None)
        if span is None:
            return
        span.set_attributes({**decided, "eventlog.seq.end": event.seq})
        span.end(end_time=event.time * _NS)

    def _tool_outcome(self, event: Event) -> None:
        data = event.data
        found = self._tools.get((data.turn, data.step, data.call_id))
        if found is not None:
            found[0].set_attribute("eventlog.seqs.outcome", event.seq)

    def _tool_result(self, event: Event) -> None:
        data = event.data
        parts = data.message.tool_results
        if not parts:
            return
        key = (data.turn, data.step, parts[0].call_id)
        if key in self._answered:
            return  # a later replace of an answered call (pruning) is not an answer
        self._answered.add(key)
        found = self._tools.pop(key, None)
        if found is None:  # never started: the span is its answer
            attrs = self._attrs(
                "execute_tool",
                event,
                **{
                    "gen_ai.tool.call.id": key[2],
                    "gen_ai.tool.type": "function",
                    "eventlog.turn": data.turn,
                    "eventlog.step": data.step,
                },
            )
            name = self._proposed.get(key, "")
            attrs["gen_ai.tool.name"] = name
            attrs.update(self._decided.get(key, {}))
            span = self._child(f"execute_tool {name}".rstrip(), SpanKind.INTERNAL, event, attrs)
        else:
            span = found[0]
        fate = result_fate(data)
        span.set_attribute("eventlog.fate", fate)
        span.set_attribute("eventlog.seqs.result", event.seq)
        span.set_attribute("eventlog.seq.end", event.seq)
        if data.error is not None and fate in _ERROR_FATES:
            span.set_attribute("error.type", data.error.code)
            span.set_status(Status(StatusCode.ERROR, f"{data.error.code}: {fate}"))
        if self._content:
            span.set_attribute("gen_ai.tool.call.result", parts[0].content)
        span.end(end_time=event.time * _NS)


_HANDLERS = {
    "request/header": SpanBuilder._header,
    "turn/start": SpanBuilder._turn_start,
    "turn/end": SpanBuilder._turn_end,
    "step/start": SpanBuilder._step_start,
    "assistant/message": SpanBuilder._reply,
    "assistant/attempt": SpanBuilder._reply,
    "tool/call": SpanBuilder._tool_call,
    "tool/approval-request": SpanBuilder._approval_request,
    "tool/approval": SpanBuilder._approval,
    "tool/outcome": SpanBuilder._tool_outcome,
    "tool/result": SpanBuilder._tool_result,
}
