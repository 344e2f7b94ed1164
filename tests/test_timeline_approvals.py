"""The timeline's approval states: each proven by one seq, findings for out-of-order approval
events, and carried through a snapshot (a session reopened from one still knows who waits)."""

from __future__ import annotations

import pytest

from eventlog import (
    ApprovalDecision,
    Session,
    StepStart,
    ToolApproval,
    ToolApprovalRequest,
    TurnStart,
)
from projections import timeline
from projections._snapshot_states import _decode_timeline, _encode_timeline
from projections._timeline import TIMELINE, Timeline
from projections.base import catch_up
from recovery import scan
from tests.test_timeline import call, propose, rebuilt

pytestmark = pytest.mark.anyio


def ask(session: Session, call_id: str) -> int:
    request = ToolApprovalRequest(
        turn=1, step=1, call_id=call_id, name="tool", arguments="{}", reason="why"
    )
    return session.append("tool/approval-request", request).seq


def decide(session: Session, call_id: str, decision: ApprovalDecision) -> int:
    payload = ToolApproval(turn=1, step=1, call_id=call_id, decision=decision, by="ana")
    return session.append("tool/approval", payload).seq


def _open_step(session: Session) -> None:
    session.append("turn/start", TurnStart(turn=1))
    session.append("step/start", StepStart(turn=1, step=1))


async def test_approval_states_carry_their_seqs(session: Session) -> None:
    _open_step(session)
    proposed = propose(session, 1, 1, "a", "b", "c")
    asked_a, asked_b = ask(session, "a"), ask(session, "b")
    view = timeline(session)
    assert [c.status for c in view.dangling] == [
        "awaiting approval",
        "awaiting approval",
        "proposed",
    ]
    assert [c.call_id for c in view.awaiting_approval] == ["a", "b"]
    assert [c.call_id for c in view.approvals] == ["a", "b"]

    # Decided: approved then started; denied stays denied (it never starts).
    approved, denied = decide(session, "a", "approve"), decide(session, "b", "deny")
    started = call(session, 1, 1, "a")
    a, b = timeline(session).call(1, 1, "a"), timeline(session).call(1, 1, "b")
    assert a is not None and b is not None
    assert (a.status, a.proposed, a.requested, a.decided, a.decision, a.call) == (
        "started",
        proposed,
        asked_a,
        approved,
        "approve",
        started,
    )
    assert (b.status, b.requested, b.decided, b.decision) == ("denied", asked_b, denied, "deny")
    assert timeline(session).awaiting_approval == ()
    # Nothing waits any more: the open step is a crash's again, and scan says so.
    assert scan(session).needs_repair
    assert timeline(session) == rebuilt(session)


async def test_out_of_order_approval_events_are_findings(session: Session) -> None:
    _open_step(session)
    propose(session, 1, 1, "a")
    decide(session, "a", "approve")  # decided, never asked
    ask(session, "nobody")  # asked about a call never proposed
    ask(session, "a")
    ask(session, "a")  # asked twice
    decide(session, "a", "deny")
    decide(session, "a", "approve")  # decided twice
    messages = [f.message for f in timeline(session).findings]
    assert any("tool/approval for 'a', which asked for none" in m for m in messages)
    assert any("tool/approval-request for 'nobody', never proposed" in m for m in messages)
    assert any("tool/approval-request for 'a' after its seq" in m for m in messages)
    assert any("tool/approval for 'a' again (first at seq" in m for m in messages)
    assert timeline(session) == rebuilt(session)


async def test_the_snapshot_form_carries_who_waits_and_what_was_decided(
    session: Session,
) -> None:
    # A session's snapshot holds its timeline in this form (the codec registered by
    # projections); one reopened from it starts from the decoded state.
    _open_step(session)
    propose(session, 1, 1, "a", "b")
    ask(session, "a")
    ask(session, "b")
    decided = decide(session, "b", "deny")
    state = catch_up(session, TIMELINE)
    restored = Timeline(_decode_timeline(_encode_timeline(state)))
    assert [c.call_id for c in restored.awaiting_approval] == ["a"]
    denied = restored.call(1, 1, "b")
    assert denied is not None
    assert (denied.status, denied.decided, denied.decision) == ("denied", decided, "deny")
    assert restored == timeline(session)
