"""``repair(session)``: append the closers a crash left owing, then flush (docs/recovery.md).

In order, continuing the seq and reusing the last event's time (so a repair is deterministic):

1. one ``tool/result`` per dangling call of the open step, in the order the model proposed them:
   the recorded result, with the context it carries, when a ``tool/outcome`` was logged
   (marked as written by recovery),
   ``TOOL_OUTCOME_UNKNOWN`` when only the ``tool/call`` was, ``TOOL_DENIED`` for a call a
   person denied (it never runs), ``TOOL_NOT_STARTED`` otherwise;
2. ``step/end`` for the open step;
3. ``turn/end {reason: interrupted}`` for the open turn (or the ``reason`` the caller gives).

Calls left unanswered in closed steps are reported by :func:`~recovery.scan`, never answered.
A step with a call awaiting a person's decision is waiting, not broken: repair appends nothing
(``Diagnosis.needs_repair`` is false), and the decision, when it comes, lets the agent go on.
Once every decision is made the step waits for its agent (``Diagnosis.awaiting_agent``):
repair appends nothing either, or an approved call would be answered ``TOOL_NOT_STARTED`` and
asked again; a call of it started with no outcome (a crash inside its body) makes it need
repair again.
A second repair finds nothing open and appends nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from time import time_ns
from typing import Any

import msgspec

from eventlog import (
    APPEND,
    Message,
    MessageSource,
    Session,
    StepEnd,
    ToolError,
    ToolOutcome,
    ToolResult,
    ToolResultPart,
    TurnEnd,
    TurnEndReason,
)

from ._approvals import recorded_event
from ._codes import TOOL_DENIED, TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN
from ._diagnosis import DanglingCall, Diagnosis, scan

__all__ = (
    "RepairReport",
    "denied_text",
    "not_started_text",
    "outcome_unknown_text",
    "repair",
)

_RECOVERY = MessageSource(kind="recovery")


def outcome_unknown_text(name: str, call_id: str) -> str:
    """What the model is told about a call that may have run."""
    return (
        f"The tool call {name} (id {call_id}) was interrupted: the process stopped after the "
        "call started and before its result was recorded, so it may or may not have run. "
        "Retry it only if it is read-only or idempotent. Otherwise, first check the external "
        "state it would have changed, and do not repeat it if it already took effect."
    )


def not_started_text(name: str, call_id: str) -> str:
    """What the model is told about a call that never started."""
    return (
        f"The tool call {name} (id {call_id}) never started: the process stopped before it "
        "ran, so it had no effect. It is safe to retry it if it is still needed."
    )


def denied_text(name: str, call_id: str, reason: str | None) -> str:
    """What the model is told about a call a person denied."""
    why = f": {reason}" if reason else ""
    return (
        f"The tool call {name} (id {call_id}) was denied by the person asked to approve it"
        f"{why}. It did not run."
    )


class RepairReport(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`repair` did.

    :ivar diagnosis: the scan the repair acted on.
    :ivar appended: seqs of the closers appended, in order (empty when nothing was open).
    :ivar ran_at: when the repair ran, wall-clock epoch milliseconds. The closers themselves
        carry the last event's time (so a repair is deterministic); this is the one record of
        when it happened.
    """

    diagnosis: Diagnosis
    appended: tuple[int, ...] = ()
    ran_at: int | None = None

    @property
    def repaired(self) -> bool:
        """True when closers were appended."""
        return bool(self.appended)


async def repair(session: Session, *, reason: TurnEndReason = "interrupted") -> RepairReport:
    """Close what a crash left open in ``session``, then flush.

    ``reason`` is the open turn's ``turn/end`` reason: ``interrupted`` (a crash) unless the
    caller knows better (an integration closing the turn of a run that raised: ``error``,
    ``aborted``); the calls are answered the same way whatever it is.

    :raises ClosedError: the session is read-only or closed (nothing is appended).
    :raises ConflictError: the session is fenced (nothing is appended).
    :raises StoreWriteError: the closers were committed but could not be written; calling
        ``repair`` (or ``flush``) again retries the write and appends nothing new.
    """
    ran_at = time_ns() // 1_000_000
    diagnosis = scan(session)
    appended: list[int] = []
    if diagnosis.needs_repair:
        session.raise_if_fenced()
        time = session.window().event(session.head).time
        recorded = await _recorded(session, diagnosis.dangling)
        for dangling in diagnosis.dangling:
            data, sources = _answer(session, dangling, recorded)
            event = session.append("tool/result", data, surface=APPEND, sources=sources, time=time)
            appended.append(event.seq)
        step = diagnosis.open_step
        if step is not None:
            closer = StepEnd(turn=step.turn, step=step.number)
            appended.append(session.append("step/end", closer, time=time).seq)
        turn = diagnosis.open_turn
        if turn is not None:
            ending = TurnEnd(turn=turn.number, reason=reason)
            appended.append(session.append("turn/end", ending, time=time).seq)
    await session.flush()
    return RepairReport(diagnosis=diagnosis, appended=tuple(appended), ran_at=ran_at)


async def _recorded(session: Session, dangling: Iterable[DanglingCall]) -> dict[int, Any]:
    """The payloads the recovered calls cite (``tool/outcome`` s, and the ``tool/approval`` of
    a denied call, for its reason), by seq: from memory, or read from the store when the
    session was opened from a snapshot taken after them."""
    found: dict[int, Any] = {}
    for item in dangling:
        seq = item.call.decided if item.kind == "denied" else item.call.outcome
        if item.kind not in ("completed", "denied") or seq is None:
            continue
        found[seq] = (await recorded_event(session, seq)).data
    return found


def _answer(
    session: Session, dangling: DanglingCall, recorded: dict[int, Any]
) -> tuple[ToolResult, tuple[int, ...]]:
    """The ``tool/result`` answering one dangling call, and the seqs it cites."""
    call = dangling.call
    if dangling.kind == "completed":
        assert call.outcome is not None
        outcome: ToolOutcome = recorded[call.outcome]
        sources = tuple(s for s in (call.call, call.outcome) if s is not None)
        message = _recovered_message(outcome, call.call_id)
        # The context the tool added is part of its result: the model sees it after the step's
        # results, whoever writes the result (the agent going on, or repair).
        data = ToolResult(
            turn=call.turn,
            step=call.step,
            message=message,
            error=outcome.error,
            context=outcome.context,
        )
        return data, sources
    if dangling.kind == "started":
        assert call.call is not None
        text = outcome_unknown_text(call.name, call.call_id)
        error = ToolError(name="ToolOutcomeUnknownError", code=TOOL_OUTCOME_UNKNOWN)
        sources = (call.call,)
    elif dangling.kind == "denied":
        assert call.decided is not None
        text = denied_text(call.name, call.call_id, recorded[call.decided].reason)
        error = ToolError(name="ToolDeniedError", code=TOOL_DENIED)
        sources = (call.decided,)
    else:
        assert call.proposed is not None
        text = not_started_text(call.name, call.call_id)
        error = ToolError(name="ToolNotStartedError", code=TOOL_NOT_STARTED)
        sources = (call.proposed,)
    message = Message(
        id=_message_id(session, call.call_id),
        role="tool",
        content=(ToolResultPart(call_id=call.call_id, content=text, is_error=True),),
        source=_RECOVERY,
    )
    return ToolResult(turn=call.turn, step=call.step, message=message, error=error), sources


def _recovered_message(outcome: ToolOutcome, call_id: str) -> Message:
    """The recorded result, answering ``call_id``, marked as written by recovery."""
    recorded = outcome.result.tool_results
    part = (
        recorded[0]
        if len(recorded) == 1 and recorded[0].call_id == call_id
        else ToolResultPart(
            call_id=call_id,
            content=outcome.result.text or "".join(p.text for p in recorded),
            is_error=any(p.is_error for p in recorded),
        )
    )
    return Message(id=outcome.result.id, role="tool", content=(part,), source=_RECOVERY)


def _message_id(session: Session, call_id: str) -> str:
    # Deterministic, so repairing two copies of the same log yields the same events.
    return f"recovery-{session.head + 1}-{call_id}"
