"""``scan(session)``: a read-only diagnosis of what a crash left open (docs/recovery.md).

The diagnosis is built from the timeline projection: the open turn and step, each dangling call
of the open step with its class and the seqs that prove it, the calls left unanswered in steps
that were closed anyway, and integrity findings (events out of order, numbering or pairing
broken). ``scan`` never appends, flushes or changes any state of the session.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from eventlog import Session
from projections import Finding, OpenStep, OpenTurn, ToolCallState, timeline

__all__ = ("DanglingCall", "DanglingKind", "Diagnosis", "scan", "classify")

#: How a dangling call is answered: ``recovered`` from its ``tool/outcome``, ``outcome-unknown``
#: (its ``tool/call`` was logged: the body may have run), ``not-started`` (no ``tool/call``).
DanglingKind = Literal["recovered", "outcome-unknown", "not-started"]


class DanglingCall(msgspec.Struct, frozen=True, kw_only=True):
    """A call of the open step with no ``tool/result``.

    :ivar call: the call's timeline state.
    :ivar kind: how repair answers it.
    :ivar proof: the seqs that prove the class: the proposing ``assistant/message``, then the
        ``tool/call`` and the ``tool/outcome`` when logged.
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
    :ivar dangling: the open step's unanswered calls, in the order the model proposed them.
    :ivar unanswered: calls left unanswered in closed steps (reported, never repaired: the
        model moved on, so an answer now would land in the wrong place).
    :ivar findings: integrity findings: events that break seq order, numbering or pairing.
    """

    session_id: str
    head: int
    open_turn: OpenTurn | None = None
    open_step: OpenStep | None = None
    dangling: tuple[DanglingCall, ...] = ()
    unanswered: tuple[ToolCallState, ...] = ()
    findings: tuple[Finding, ...] = ()

    @property
    def needs_repair(self) -> bool:
        """True when :func:`~recovery.repair` would append closers."""
        return self.open_turn is not None or self.open_step is not None

    @property
    def clean(self) -> bool:
        """True when nothing is open, unanswered or suspicious."""
        return not (self.needs_repair or self.unanswered or self.findings)


def classify(call: ToolCallState) -> DanglingCall:
    """The class of an unanswered call and the seqs that prove it."""
    proof = tuple(s for s in (call.proposed, call.call, call.outcome) if s is not None)
    kind: DanglingKind
    if call.outcome is not None:
        kind = "recovered"
    elif call.call is not None:
        kind = "outcome-unknown"
    else:
        kind = "not-started"
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
        unanswered=tuple(c for c in view.unanswered if c.key not in open_keys),
        findings=view.findings,
    )
