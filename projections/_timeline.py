"""The timeline projection: the open turn and step, numbering, and every tool call's state.

See docs/architecture.md. A tool call moves through up to four states, each proven by the seq
of one event:

``proposed``
    the model asked for it (a ``ToolCallPart`` in an appended ``assistant/message``);
``awaiting approval``, then ``approved`` or ``denied``
    (only for a call that needs a decision) its ``tool/approval-request`` was logged, then
    its ``tool/approval``; a denied call never starts;
``started``
    ``tool/call`` was logged (the body may have run);
``completed``
    ``tool/outcome`` was logged (the body ran; its result is durable);
``resulted``
    ``tool/result`` was logged (the model will see the answer).

These are the names of a call's state everywhere: recovery's ``DanglingKind`` is every state
short of ``resulted``.

The code is split in three: the types and the fold's state (``_timeline_state``), the reader's
snapshot (``_timeline_view``) and the fold's handlers (``_timeline_fold``); this module holds
the projection and the functions that read it.

A call is identified by ``(turn, step, call_id)``: providers only promise call ids unique within
one reply. Turns count from 1; steps restart at 1 in each turn.

The fold also collects *findings*: events that break the numbering or pairing rules (a second
``turn/start`` while a turn is open, a result for a call nobody proposed, a call answered twice,
...). A log written by the agent has none; recovery reports them as integrity findings.

Reading is O(1) in the history length: :func:`timeline` returns an immutable :class:`Timeline`
snapshot that shares the fold's append-only version log, so a snapshot a reader holds never
changes when the session moves on.

What a timeline holds: on a session replayed whole, every call of the log. On a session opened
from a snapshot, or a live one that has trimmed at one since (``Session.trims``: a long-lived
session drops at each snapshot what that snapshot covers, and :meth:`TimelineState.trimmed` is
what its timeline keeps), only what the snapshot carries and what came after: the numbering,
the open turn and step, every finding, the calls of the open step and every unanswered call
(those can still change), and every call that appeared since. The answered calls of steps
that had ended are forgotten: :meth:`Timeline.call` returns ``None`` for them and
:meth:`Timeline.calls` leaves them out, and an event about one later (a second
``tool/result``, say) is reported as about a call never proposed. Both ways answer alike; a
timeline read before a trim keeps answering what it did.
"""

from __future__ import annotations

from eventlog import Event, Session

from ._timeline_fold import HANDLERS
from ._timeline_state import (
    CallKey,
    CallStatus,
    Finding,
    OpenStep,
    OpenTurn,
    TimelineState,
    ToolCallState,
)
from ._timeline_view import Timeline
from .base import catch_up, events_through, fold, read_through

__all__ = (
    "CallKey",
    "CallStatus",
    "Finding",
    "OpenStep",
    "OpenTurn",
    "TIMELINE",
    "Timeline",
    "TimelineProjection",
    "TimelineState",
    "ToolCallState",
    "timeline",
    "timeline_at",
)


class TimelineProjection:
    """The timeline fold (see :mod:`projections.base`)."""

    key = "projections.timeline"

    def initial(self) -> TimelineState:
        return TimelineState()

    def apply(self, state: TimelineState, event: Event) -> TimelineState:
        state.snapshot = None
        state.seq = event.seq
        handler = HANDLERS.get(event.type)
        if handler is not None:
            handler(state, event)
        return state


#: The one timeline projection instance.
TIMELINE = TimelineProjection()


async def timeline_at(session: Session, at: int) -> Timeline:
    """``timeline(session, at=at)`` on any session: the events it folds are read from the
    store where they are not in memory (a session opened from a snapshot), O(at).

    :raises ValidationError: ``at`` is not between -1 and the session's head.
    """
    return Timeline(fold(TIMELINE, await read_through(session, at)))


def timeline(session: Session, *, at: int | None = None) -> Timeline:
    """The timeline of ``session`` now, or as it stood after event ``at``.

    O(new events) per call when reading the present; ``at`` folds the prefix from scratch.

    :raises ValidationError: ``at`` is not between -1 and the session's head.
    """
    if at is not None:
        return Timeline(fold(TIMELINE, events_through(session, at)))
    state = catch_up(session, TIMELINE)
    snapshot = state.snapshot
    if not isinstance(snapshot, Timeline):
        snapshot = state.snapshot = Timeline(state)
    return snapshot
