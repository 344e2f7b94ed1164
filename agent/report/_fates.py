"""What is known about each tool call and model attempt of a session, and the session's state.

Shared by the ``eventlog`` command, the web app and the OpenTelemetry export, so every view
classes a call the same way.
"""

from __future__ import annotations

from typing import Any, Literal

from eventlog import EventLogError, Session, ToolCallPart, ToolResult
from projections import ToolCallState, timeline
from recovery import (
    ABORTED_BEFORE_DISPATCH,
    TOOL_DENIED,
    TOOL_NOT_STARTED,
    TOOL_OUTCOME_UNKNOWN,
    scan,
)

__all__ = (
    "FAILED_FATES",
    "FAILED_TURN_ENDS",
    "FINDING_STATES",
    "Fate",
    "PENDING_FATES",
    "call_approval",
    "SessionState",
    "call_arguments",
    "call_error",
    "call_fate",
    "call_row",
    "failed_attempts",
    "failed_turns",
    "result_fate",
    "session_state",
)

#: ``completed`` (a normal result), ``error`` (the tool failed: it raised, was unknown, got
#: invalid arguments or returned its own error code), ``not started`` (the body never ran),
#: ``outcome unknown`` (the body may have run; nobody knows its effect), ``recovered`` (its
#: logged outcome answered it after a crash), ``in progress`` (not answered yet, and a live
#: writer holds the session: its agent is still at work on it, nothing to report yet),
#: ``awaiting approval`` (it waits for a person's decision, whoever holds the session),
#: ``denied`` (a person denied it: it never ran).
Fate = Literal[
    "completed",
    "error",
    "not started",
    "outcome unknown",
    "recovered",
    "in progress",
    "awaiting approval",
    "denied",
]
#: Fates that are findings: ``audit`` exits 1 when a call has one. ``outcome unknown`` is one:
#: the call may have had its effect and nobody knows (a crash cut it; a person must look).
#: ``not started`` is not: the body never ran (a cancel, or a crash, which the turn's
#: ``interrupted`` end reports).
FAILED_FATES: frozenset[str] = frozenset({"error", "outcome unknown"})
#: Fates that wait for a person: ``audit`` reports them as findings (exit 1) though nothing
#: failed, so a decision nobody made is never missed.
PENDING_FATES: frozenset[str] = frozenset({"awaiting approval"})
#: ``turn/end`` reasons that are findings: the turn failed, or a crash cut it (recovery closed
#: it). A cancel, a guardrail block or the token limit are the run's own decisions.
FAILED_TURN_ENDS: frozenset[str] = frozenset({"error", "interrupted"})

SessionState = Literal[
    "balanced",
    "running",
    "needs repair",
    "corrupt",
    "unknown type",
    "awaiting approval",
    "awaiting agent",
]
#: States that are findings for every command (exit 1): the log is damaged, or a turn is open
#: with no live writer (a crash: ``eventlog recover`` closes it). ``awaiting approval`` and
#: ``awaiting agent`` are not: nothing is broken (``audit`` still exits 1 for a call that waits
#: for a person's decision; see :data:`PENDING_FATES`).
FINDING_STATES: frozenset[str] = frozenset({"corrupt", "needs repair"})

#: Result error codes that say the tool body never ran (recovery, or the agent on cancel).
_NOT_STARTED_CODES = frozenset({TOOL_NOT_STARTED, ABORTED_BEFORE_DISPATCH})
_UNKNOWN_CODES = frozenset({TOOL_OUTCOME_UNKNOWN})


def call_error(session: Session, call: ToolCallState) -> dict[str, str] | None:
    """The error of a call's ``tool/result`` (``{"code", "name"}``), or ``None``."""
    if call.result is None:
        return None
    error = session.window(0)[call.result].data.error
    return None if error is None else {"code": error.code, "name": error.name}


def call_fate(session: Session, call: ToolCallState, *, running: bool = False) -> Fate:
    """What is known about a call's effect.

    Answered calls are classed by their ``tool/result``: the error codes recovery (or a cancel)
    writes, any other error code (``error``), a result written by recovery from a logged
    ``tool/outcome`` (``recovered``), or a normal result (``completed``). Unanswered calls are
    ``in progress`` while a live writer holds the session and their step is open (``running``:
    a reader beside a live agent must not call its call in flight a crash's), else classed the
    way repair would."""
    if call.result is not None:
        return result_fate(session.window(0)[call.result].data)
    if call.outcome is not None:
        return "completed"
    if call.status in ("awaiting approval", "denied"):
        return call.status
    if running and _in_open_step(session, call):
        return "in progress"
    return "outcome unknown" if call.call is not None else "not started"


def _in_open_step(session: Session, call: ToolCallState) -> bool:
    """Whether ``call`` belongs to the step still open (one of an ended step that was never
    answered is the crash's, whoever holds the session now)."""
    step = timeline(session).step
    return step is not None and (step.turn, step.number) == (call.turn, call.step)


def result_fate(result: ToolResult) -> Fate:
    """The fate a ``tool/result`` gives its call: by its error code (the codes recovery or a
    cancel writes; any other is ``error``), else ``recovered`` when recovery wrote it from a
    logged ``tool/outcome``, else ``completed``."""
    code = result.error.code if result.error is not None else None
    if code in _NOT_STARTED_CODES:
        return "not started"
    if code in _UNKNOWN_CODES:
        return "outcome unknown"
    if code == TOOL_DENIED:
        return "denied"
    if code is not None:
        return "error"
    source = result.message.source
    return "recovered" if source is not None and source.kind == "recovery" else "completed"


def call_arguments(session: Session, call: ToolCallState) -> str:
    """The call's arguments as the model wrote them (``""`` when none was logged)."""
    events = session.window(0)
    if call.call is not None:
        arguments: str = events[call.call].data.arguments
        return arguments
    if call.proposed is not None:
        parts: tuple[ToolCallPart, ...] = events[call.proposed].data.message.tool_calls
        for part in parts:
            if part.id == call.call_id:
                return part.arguments
    return ""


def call_row(session: Session, call: ToolCallState, *, running: bool = False) -> dict[str, Any]:
    """One call as JSON builtins: where, what, state, fate, error and the proving seqs
    (``running``: a live writer holds the session, see :func:`call_fate`)."""
    return {
        "turn": call.turn,
        "step": call.step,
        "call_id": call.call_id,
        "name": call.name,
        "arguments": call_arguments(session, call),
        "state": call.status,
        "outcome": call_fate(session, call, running=running),
        "error": call_error(session, call),
        "seqs": {
            "proposed": call.proposed,
            "requested": call.requested,
            "decided": call.decided,
            "call": call.call,
            "outcome": call.outcome,
            "result": call.result,
        },
        "approval": call_approval(session, call),
    }


def call_approval(session: Session, call: ToolCallState) -> dict[str, Any] | None:
    """The call's approval as JSON builtins, or ``None`` when it needed none: the policy's
    ``reason``, when it was asked (``requested_at``), and, once decided, the ``decision``,
    who decided (``by``), why (``decision_reason``) and when (``decided_at``); the seqs that
    prove them are the row's ``requested`` and ``decided``."""
    if call.requested is None:
        return None
    event = session.window().event  # the report opens sessions whole
    asked = event(call.requested)
    found: dict[str, Any] = {
        "reason": asked.data.reason,
        "requested_at": asked.time,
        "requested": call.requested,
        "decision": None,
        "by": None,
        "decision_reason": None,
        "decided_at": None,
        "decided": call.decided,
    }
    if call.decided is not None:
        decided = event(call.decided)
        found.update(
            decision=decided.data.decision,
            by=decided.data.by,
            decision_reason=decided.data.reason,
            decided_at=decided.time,
        )
    return found


def failed_attempts(session: Session) -> list[dict[str, Any]]:
    """Every ``assistant/attempt`` that carries an error: ``{"seq", "turn", "step", "error"}``."""
    return [
        {"seq": e.seq, "turn": e.data.turn, "step": e.data.step, "error": e.data.error}
        for e in session.window(0)
        if e.type == "assistant/attempt" and e.data.error is not None
    ]


def failed_turns(session: Session) -> list[dict[str, Any]]:
    """Every ``turn/end`` whose reason is in :data:`FAILED_TURN_ENDS`:
    ``{"seq", "turn", "reason"}``."""
    return [
        {"seq": e.seq, "turn": e.data.turn, "reason": e.data.reason}
        for e in session.window(0)
        if e.type == "turn/end" and e.data.reason in FAILED_TURN_ENDS
    ]


def session_state(
    session: Session, fault: EventLogError | None, *, running: bool, unknown: object = None
) -> SessionState:
    """``corrupt`` (the log fails verification), ``unknown type`` (``unknown`` names an event
    of a type the reader's registry does not know: not damage, but nothing past it can be
    classed), ``running`` (a live writer holds the lease:
    whatever is open is in progress), ``needs repair`` (a turn is open and nobody is writing: a
    crash, inside a step with calls awaiting an answer or between steps; what
    :attr:`recovery.Diagnosis.needs_repair` says), ``awaiting approval`` (a step waits for a
    person's decision, nobody writing: not a crash, nothing to repair), ``awaiting agent``
    (every decision the open step asked for is made and no call of it was cut inside its body:
    the agent goes on with it at its next run, nothing to repair;
    :attr:`recovery.Diagnosis.awaiting_agent`) or ``balanced``. Calls left unanswered in a
    closed step are not something repair can fix; ``audit`` reports them."""
    if fault is not None:
        return "corrupt"
    if unknown is not None:
        return "unknown type"
    if running:
        return "running"
    line = timeline(session)
    if line.awaiting_approval:
        return "awaiting approval"
    if scan(session).awaiting_agent:
        return "awaiting agent"
    return "needs repair" if line.turn is not None or line.dangling else "balanced"
