"""Approvals: the calls a waiting step holds for a person, and the decisions that release them.

docs/approvals.md. A step whose calls need a decision logs one ``tool/approval-request`` per
such call and waits; :func:`decide` records a person's ``tool/approval`` (``approve`` or
``deny``) and flushes it. It lives here, beside repair, because it is the other writer that
closes what a step left open, and because it needs no agent: the ``eventlog approve`` command
and an agent in another process record decisions the same way.

A decision is recorded at most once per call and never refused silently:

- the same decision again is a no-op returning the first (a retried click, a reload);
- a different decision raises :class:`ApprovalConflictError` naming the first and its seq;
- a call that is unknown, needs no decision, or was never decided and belongs to a step that
  is no longer open raises :class:`ApprovalError`.

The first two hold after the call's step ended too (the agent went on with the decision), as
long as the session remembers the call: one opened from a snapshot taken after its step ended
has forgotten it, and answers as for an unknown call.

Nothing is committed by a refused decision.
"""

from __future__ import annotations

from typing import Any

import msgspec

from eventlog import (
    ApprovalDecision,
    Event,
    Session,
    ToolApproval,
    ToolApprovalRequest,
    ValidationError,
)
from projections import Timeline, ToolCallState, timeline

__all__ = (
    "ApprovalConflictError",
    "ApprovalError",
    "ApprovalRecord",
    "PendingApproval",
    "decide",
    "pending_approvals",
    "record_of",
    "recorded_event",
)


class ApprovalError(ValidationError):
    """A decision was refused: the call is unknown, needs no decision, or its step is no longer
    open (its turn ended). Nothing was committed. ``call_id`` names the call."""

    def __init__(self, message: str, *, session_id: str, call_id: str, seq: int | None = None):
        super().__init__(message, session_id=session_id, seq=seq)
        self.call_id = call_id


class ApprovalConflictError(ApprovalError):
    """A call already has the other decision: ``first`` is it (``approve`` or ``deny``) and
    ``seq`` its ``tool/approval``. Nothing was committed."""

    def __init__(
        self,
        message: str,
        *,
        session_id: str,
        call_id: str,
        first: ApprovalDecision,
        seq: int,
    ) -> None:
        super().__init__(message, session_id=session_id, call_id=call_id, seq=seq)
        self.first = first


class PendingApproval(msgspec.Struct, frozen=True, kw_only=True):
    """A call waiting for a decision.

    :ivar seq: its ``tool/approval-request``.
    :ivar requested_at: that event's time (epoch milliseconds).
    :ivar reason: what the tool's approval policy said.
    """

    session_id: str
    turn: int
    step: int
    call_id: str
    name: str
    arguments: str
    reason: str
    seq: int
    requested_at: int


class ApprovalRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A recorded decision: ``seq`` and ``at`` (epoch milliseconds) are its ``tool/approval``,
    ``requested`` the ``tool/approval-request`` it answers."""

    session_id: str
    turn: int
    step: int
    call_id: str
    decision: ApprovalDecision
    by: str
    reason: str | None
    seq: int
    at: int
    requested: int


async def recorded_event(session: Session, seq: int) -> Event:
    """Event ``seq``: from memory, or from the store when the session holds it no longer (it
    was opened from, or trimmed at, a later snapshot)."""
    (event,) = await session.events(seq, limit=1)
    return event


async def pending_approvals(session: Session) -> tuple[PendingApproval, ...]:
    """The open step's calls waiting for a decision, in the model's order (empty when none)."""
    found: list[PendingApproval] = []
    for call in timeline(session).awaiting_approval:
        assert call.requested is not None
        event = await recorded_event(session, call.requested)
        data: ToolApprovalRequest = event.data
        found.append(
            PendingApproval(
                session_id=session.id,
                turn=call.turn,
                step=call.step,
                call_id=call.call_id,
                name=data.name,
                arguments=data.arguments,
                reason=data.reason,
                seq=event.seq,
                requested_at=event.time,
            )
        )
    return tuple(found)


async def decide(
    session: Session,
    call_id: str,
    decision: ApprovalDecision,
    *,
    by: str,
    reason: str | None = None,
) -> ApprovalRecord:
    """Record ``decision`` on the waiting call ``call_id`` of the open step and flush it.

    :param by: who decided (a non-empty string).
    :raises ApprovalConflictError: the call already has the other decision.
    :raises ApprovalError: the call is unknown, needs no decision, or its step is not open.
    :raises ValidationError: ``decision``, ``by`` or ``reason`` is of the wrong kind.
    :raises StoreWriteError: the decision was committed but could not be written (flushing
        again retries it).
    """
    _check_arguments(session, decision, by, reason)
    call = _requested_call(session, call_id)
    assert call.requested is not None
    if call.decided is not None:
        first = await recorded_event(session, call.decided)
        if first.data.decision != decision:
            raise ApprovalConflictError(
                f"session {session.id!r}: call {call_id!r} of turn {call.turn}, step "
                f"{call.step} was already decided {first.data.decision!r} at seq {first.seq} "
                f"by {first.data.by!r}; a decision is final",
                session_id=session.id,
                call_id=call_id,
                first=first.data.decision,
                seq=first.seq,
            )
        return record_of(session.id, first, call.requested)
    session.raise_if_fenced()
    payload = ToolApproval(
        turn=call.turn,
        step=call.step,
        call_id=call_id,
        decision=decision,
        by=by,
        reason=reason,
    )
    event = session.append("tool/approval", payload, sources=(call.requested,))
    await session.flush()
    return record_of(session.id, event, call.requested)


def record_of(session_id: str, event: Event, requested: int) -> ApprovalRecord:
    """The :class:`ApprovalRecord` of a ``tool/approval`` event."""
    data: ToolApproval = event.data
    return ApprovalRecord(
        session_id=session_id,
        turn=data.turn,
        step=data.step,
        call_id=data.call_id,
        decision=data.decision,
        by=data.by,
        reason=data.reason,
        seq=event.seq,
        at=event.time,
        requested=requested,
    )


def _check_arguments(session: Session, decision: Any, by: Any, reason: Any) -> None:
    where = f"session {session.id!r}: a decision"
    if decision not in ("approve", "deny"):
        raise ValidationError(f"{where} must be 'approve' or 'deny', got {decision!r}")
    if not isinstance(by, str) or not by.strip():
        raise ValidationError(f"{where} names who made it: by= must be a non-empty string")
    if reason is not None and not isinstance(reason, str):
        raise ValidationError(f"{where}: reason= must be a string or None, got {reason!r}")


def _requested_call(session: Session, call_id: str) -> ToolCallState:
    """The open step's call ``call_id`` that asked for a decision, or an earlier call of that
    id that was decided (for the first decision to answer), or the error saying why there is
    none to decide."""
    view = timeline(session)
    for call in view.open_calls:
        if call.call_id == call_id:
            if call.requested is None:
                raise ApprovalError(
                    f"session {session.id!r}: call {call_id!r} of turn {call.turn}, step "
                    f"{call.step} needs no decision (no tool/approval-request was logged)",
                    session_id=session.id,
                    call_id=call_id,
                )
            return call
    earlier = [c for c in view.calls() if c.call_id == call_id]
    if earlier:
        last = earlier[-1]
        if last.decided is not None:
            # Decided, and the agent went on since: a retried decision (a click, a command
            # run again) is still answered by the first one, not by how fast the agent was.
            return last
        raise ApprovalError(
            f"session {session.id!r}: call {call_id!r} belongs to turn {last.turn}, step "
            f"{last.step}, which is no longer open (its {_ended(view, last)}); nothing waits "
            "for a decision on it",
            session_id=session.id,
            call_id=call_id,
        )
    raise ApprovalError(
        f"session {session.id!r}: no call {call_id!r} waits for a decision (unknown call id)",
        session_id=session.id,
        call_id=call_id,
    )


def _ended(view: Timeline, call: ToolCallState) -> str:
    turn = view.turn
    return "step ended" if turn is not None and turn.number == call.turn else "turn ended"
