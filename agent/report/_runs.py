"""A session as a tree of spans: turns, their steps, each step's model requests (failed attempts
included) and tool calls, each with the seqs and times that prove it.

The web timeline draws these as bars; the OpenTelemetry export sends them as spans. One walk
over the events (plus the timeline projection for the calls), so both views agree.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from eventlog import Event, Session
from projections import timeline
from projections.header import REQUEST_HEADER

from ._fates import call_arguments, call_error, call_fate

__all__ = ("RunSpan", "SpanKind", "run_spans")

SpanKind = Literal["turn", "step", "model", "tool"]


class RunSpan(msgspec.Struct, kw_only=True):
    """One bar of the timeline, one span of the trace.

    :ivar start: seq of the event that opens it; ``end`` the one that closes it (``None``: still
        open at the head of the log).
    :ivar fate: tool calls: a :data:`~agent.report.Fate`; turns: the ``turn/end`` reason (or
        ``open``); steps: ``completed`` or ``open``; model requests: ``completed``, ``error``
        (a failed attempt) or ``interrupted``.
    :ivar seqs: the seqs that prove the span (for calls: proposed, call, outcome, result).
    :ivar attrs: what the span is about (model, usage, finish, error code, call id, arguments).
    """

    kind: SpanKind
    name: str
    turn: int
    step: int | None
    start: int
    end: int | None
    start_time: int
    end_time: int | None
    fate: str
    seqs: dict[str, int] = msgspec.field(default_factory=dict)
    attrs: dict[str, Any] = msgspec.field(default_factory=dict)
    children: list[RunSpan] = msgspec.field(default_factory=list)


class _Walk:
    """The state of the single pass over the events."""

    def __init__(self) -> None:
        self.turns: list[RunSpan] = []
        self.turn: RunSpan | None = None
        self.step: RunSpan | None = None
        self.model_from: Event | None = None
        self.header = REQUEST_HEADER.initial()  # the request header in force, as it goes
        self.steps: dict[tuple[int, int], RunSpan] = {}

    def event(self, event: Event) -> None:
        kind = event.type
        data = event.data
        self.header = REQUEST_HEADER.apply(self.header, event)
        if kind == "turn/start":
            self.turn = _span("turn", f"turn {data.turn}", data.turn, None, event, "open")
            self.turns.append(self.turn)
        elif kind == "turn/end" and self.turn is not None:
            _close(self.turn, event, data.reason)
            self.turn = self.step = None
        elif kind == "step/start" and self.turn is not None:
            self.step = _span("step", f"step {data.step}", data.turn, data.step, event, "open")
            self.turn.children.append(self.step)
            self.steps[(data.turn, data.step)] = self.step
            self.model_from = event
        elif kind == "step/end" and self.step is not None:
            _close(self.step, event, "completed")
            self.step = None
        elif kind in ("assistant/message", "assistant/attempt"):
            self._model_request(event)

    def _model_request(self, event: Event) -> None:
        if self.step is None or self.model_from is None:
            return
        data = event.data
        model = self.header.model
        name = f"chat {model}" if model else "chat"
        span = _span("model", name, data.turn, data.step, self.model_from, "completed")
        span.attrs["model"] = model
        if event.type == "assistant/attempt":
            span.fate = "error" if data.error is not None else "completed"
            span.attrs["error"] = data.error
        else:
            span.fate = "interrupted" if data.interrupted else "completed"
            span.attrs["finish"] = data.finish
            span.attrs["usage"] = msgspec.to_builtins(data.usage) if data.usage else None
            span.attrs["message_seq"] = event.seq
        _close(span, event, span.fate)
        self.step.children.append(span)
        self.model_from = event  # a retry's request goes out after the failed attempt


def _span(
    kind: SpanKind, name: str, turn: int, step: int | None, opened: Event, fate: str
) -> RunSpan:
    return RunSpan(
        kind=kind,
        name=name,
        turn=turn,
        step=step,
        start=opened.seq,
        end=None,
        start_time=opened.time,
        end_time=None,
        fate=fate,
        seqs={"start": opened.seq},
    )


def _close(span: RunSpan, closing: Event, fate: str) -> None:
    span.end = closing.seq
    span.end_time = closing.time
    span.fate = fate
    span.seqs["end"] = closing.seq


def run_spans(session: Session) -> list[RunSpan]:
    """The session's turns, each with its steps; each step with its model requests and then
    its tool calls in commit order (the order their ``tool/call`` — or, never started, their
    answer — was logged), so parallel calls stand side by side as they ran."""
    events = session.window(0)
    walk = _Walk()
    for event in events:
        walk.event(event)
    # Commit order: by the seq of the ``tool/call``; calls that never started come after, by
    # the seq of their answer (or their proposal, when unanswered).
    calls = sorted(
        timeline(session).calls(),
        key=lambda c: (
            c.call if c.call is not None else c.result if c.result is not None else c.proposed or 0
        ),
    )
    for call in calls:
        step = walk.steps.get((call.turn, call.step))
        first = call.proposed if call.proposed is not None else call.call
        if step is None or first is None:
            continue
        opened = events[call.call if call.call is not None else first]
        span = _span("tool", f"execute_tool {call.name}", call.turn, call.step, opened, "open")
        span.seqs = {
            k: v
            for k, v in (
                ("proposed", call.proposed),
                ("call", call.call),
                ("outcome", call.outcome),
                ("result", call.result),
            )
            if v is not None
        }
        if call.result is not None:
            _close(span, events[call.result], "")
            span.seqs.pop("end")
        span.fate = call_fate(session, call)
        span.attrs.update(
            call_id=call.call_id,
            tool=call.name,
            arguments=call_arguments(session, call),
            error=call_error(session, call),
        )
        step.children.append(span)
    return walk.turns
