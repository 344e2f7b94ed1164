"""``scan(session)``: a read-only diagnosis of what a crash left open (docs/recovery.md).

The diagnosis is built from the timeline projection: the open turn and step, each dangling call
of the open step with its state and the seqs that prove it, the calls left unanswered in steps
that were closed anyway, and integrity findings (events out of order, numbering or pairing
broken). ``scan`` never appends, flushes or changes any state of the session.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from eventlog import Session
from projections import Finding, OpenStep, OpenTurn, ToolCallState, timeline

__all__ = ("DanglingCall", "DanglingKind", "Diagnosis", "scan", "classify")

#: The state a dangling call reached: a :data:`~projections.CallStatus` short of ``resulted``,
#: so a state has one name in the timeline and here. It decides how repair answers the call:
#: ``completed`` (its ``tool/outcome`` was logged) with the recorded result, ``started`` (its
#: ``tool/call`` was logged: the body may have run) as ``TOOL_OUTCOME_UNKNOWN``, ``proposed``
#: and ``approved`` (no ``tool/call``: it never ran) as ``TOOL_NOT_STARTED``, ``denied`` as
#: ``TOOL_DENIED``. A step holding an ``awaiting approval`` call waits for a person, and one whose
#: decisions are all made waits for its agent (:attr:`Diagnosis.awaiting_agent`): repair leaves
#: both as they are.
DanglingKind = Literal[
    "proposed", "awaiting approval", "approved", "denied", "started", "completed"
]


class DanglingCall(msgspec.Struct, frozen=True, kw_only=True):
    """A call of the open step with no ``tool/result``.

    :ivar call: the call's timeline state.
    :ivar kind: the state it reached (``call.status``), which decides how repair answers it.
    :ivar proof: the seqs that prove the class: the proposing ``assistant/message``, then the
        ``tool/approval-request``, the ``tool/approval``, the ``tool/call`` and the
        ``tool/outcome`` when logged.
    """

    call: ToolCallState
    kind: DanglingKind
    proof: tuple[int, ...]


class Diagnosis(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`scan` found.

    :ivar session_id: the session scanned.
    :ivar head: the last seq scanned (-1 when empty).
    :ivar open_turn: the turn still open, or ``None``.
    :ivar open_step: the step still open, or ``None``.
    :ivar dangling: the open step's proposed calls with no ``tool/result``, in the order the
        model proposed them (:attr:`~projections.Timeline.dangling`): repair answers these.
    :ivar unanswered_in_closed_steps: the proposed calls with no ``tool/result`` outside the
        open step, oldest first: their step ended without answering them. Reported, never
        repaired (the model moved on, so an answer now would land in the wrong place). With
        ``dangling`` they make up :attr:`~projections.Timeline.unanswered`.
    :ivar findings: integrity findings: events that break seq order, numbering or pairing.
    :ivar awaiting_approval: the open step's calls that wait for a person's decision
        (:attr:`~projections.Timeline.awaiting_approval`). While there are any, the session is
        waiting, not broken: it does not need repair, and repair appends nothing.
    :ivar approvals: the open step's calls that asked for a decision, decided, answered or not
        (:attr:`~projections.Timeline.approvals`): a step holding any is gone on by its agent
        (``Agent.resume`` does not repair it), so :attr:`awaiting_agent` is read from them.
    """

    session_id: str
    head: int
    open_turn: OpenTurn | None = None
    open_step: OpenStep | None = None
    dangling: tuple[DanglingCall, ...] = ()
    unanswered_in_closed_steps: tuple[ToolCallState, ...] = ()
    findings: tuple[Finding, ...] = ()
    awaiting_approval: tuple[ToolCallState, ...] = ()
    approvals: tuple[ToolCallState, ...] = ()

    @property
    def awaiting_agent(self) -> bool:
        """True when the open step asked for decisions, every one is made, and no call of it
        was started without a logged outcome: the step waits for its agent to go on (run the
        approved calls, answer the denied ones), which it does at its next run. Not broken:
        repairing it would answer an approved call ``TOOL_NOT_STARTED`` and have the model
        ask the person again. A call started with no outcome is a crash inside its body (its
        effect is unknown): that step needs repair, decisions or not."""
        if self.open_step is None or not self.approvals or self.awaiting_approval:
            return False
        return not any(d.kind == "started" for d in self.dangling)

    @property
    def needs_repair(self) -> bool:
        """True when :func:`~recovery.repair` would append closers: a turn or step is open, no
        call of it waits for a decision, and it does not wait for its agent to go on with its
        decisions (:attr:`awaiting_agent`)."""
        is_open = self.open_turn is not None or self.open_step is not None
        return is_open and not self.awaiting_approval and not self.awaiting_agent

    @property
    def clean(self) -> bool:
        """True when nothing is open, waiting for a decision or for its agent, left unanswered
        in a closed step, or suspicious."""
        return not (
            self.needs_repair
            or self.awaiting_approval
            or self.awaiting_agent
            or self.unanswered_in_closed_steps
            or self.findings
        )


def classify(call: ToolCallState) -> DanglingCall:
    """The state of a call with no ``tool/result`` and the seqs that prove it.

    :raises ValueError: the call has a ``tool/result`` (it is not dangling).
    """
    kind = call.status
    if kind == "resulted":
        raise ValueError(f"call {call.call_id!r} was answered at seq {call.result}")
    seqs = (call.proposed, call.requested, call.decided, call.call, call.outcome)
    proof = tuple(s for s in seqs if s is not None)
    return DanglingCall(call=call, kind=kind, proof=proof)


def scan(session: Session) -> Diagnosis:
    """Diagnose ``session`` without changing it.

    O(events since the timeline was last read), O(n) only the first time. The hash chain and
    seq order were verified when the session was loaded; ``findings`` are the timeline's.
    """
    view = timeline(session)
    dangling = view.dangling
    open_keys = {c.key for c in dangling}
    return Diagnosis(
        session_id=session.id,
        head=view.seq,
        open_turn=view.turn,
        open_step=view.step,
        dangling=tuple(classify(call) for call in dangling),
        unanswered_in_closed_steps=tuple(c for c in view.unanswered if c.key not in open_keys),
        findings=view.findings,
        awaiting_approval=view.awaiting_approval,
        approvals=view.approvals,
    )
