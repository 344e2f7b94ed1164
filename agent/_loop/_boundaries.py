"""The two step boundaries where the agent's hooks decide (see :mod:`agent._loop._hooks`).

Opening a step: what the step takes from the inbox is found, ``before_step`` (if set) is asked,
and then, in one run of commits with no ``await`` between them, the inbox splices,
``step/start``, the ``agent/hook`` record and the step's ``user/message`` s are appended. The
request checkpoint that follows flushes them together, so the decision is durable before the
model is called. A :class:`~agent.Block` refuses the inputs the hook was shown (those still
pending; input that arrived while an async hook ran stays queued); a hook that failed leaves
nothing lost: the step takes its input as usual, and the turn ends ``error``.

Ending a step with no tool calls to run: ``should_continue`` (if set) is asked, its record
appended before ``step/end``, and the step-end checkpoint flushes it before the next step.
Then :func:`turn_ending` says whether the turn goes on; a loop that failed closes the turn with
:func:`close_after_failure`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from eventlog import (
    APPEND,
    EventLogError,
    InboxTarget,
    Session,
    StepEnd,
    StepStart,
    TurnEnd,
    TurnEndReason,
    UserMessage,
)
from projections import inbox, timeline
from projections.inbox import claim, splice

from ._hooks import Block, Hooks, StepContext, StepPlan, StepSettings
from ._outcomes import StepResult

__all__ = (
    "Opened",
    "ask_continue",
    "close_after_failure",
    "may_continue",
    "open_step",
    "turn_ending",
)

logger = logging.getLogger("agent")


@dataclass(frozen=True, slots=True)
class Opened:
    """An opened step: the settings its request is made with, or why the turn ends now."""

    settings: StepSettings
    ending: Literal["blocked", "error"] | None = None


async def open_step(
    session: Session, turn: int, step: int, settings: StepSettings, hooks: Hooks
) -> Opened:
    """Open step ``step`` of turn ``turn`` (see the module docstring)."""
    target: InboxTarget = "next-turn" if step == 1 else "next-step"
    if hooks.before_step is None:
        _take(session, turn, step, target, None)
        return Opened(settings)
    shown = claim(inbox(session), target).items
    ctx = StepContext(session, turn, step, settings, inputs=tuple(i.message for i in shown))
    decided = await hooks.ask_before_step(ctx)
    if isinstance(decided.answer, Block):
        refused = _refuse(session, [item.id for item in shown])
        session.append("step/start", StepStart(turn=turn, step=step))
        session.append("agent/hook", decided.record, sources=refused)
        return Opened(settings, "blocked")
    _take(session, turn, step, target, decided.record)
    if decided.failed:
        return Opened(settings, "error")
    if isinstance(decided.answer, StepPlan):
        return Opened(decided.answer.applied(settings))
    return Opened(settings)


def _take(session: Session, turn: int, step: int, target: InboxTarget, record: object) -> None:
    """Claim the step's input, open the step, record the decision, append the input."""
    taken = claim(inbox(session), target)
    claimed = [session.append("agent/inbox/spliced", payload).seq for payload in taken.splices]
    session.append("step/start", StepStart(turn=turn, step=step))
    if record is not None:
        session.append("agent/hook", record, sources=tuple(claimed))
    for item in taken.items:
        session.append(
            "user/message",
            UserMessage(message=item.message),
            surface=APPEND,
            sources=tuple(claimed),
        )


def _refuse(session: Session, ids: list[str]) -> tuple[int, ...]:
    """Settle the still-pending items ``ids`` as ``refused``; the seqs of the splices."""
    seqs: list[int] = []
    for item_id in ids:
        box = inbox(session)
        for target in ("next-step", "next-turn"):
            positions = [n for n, item in enumerate(box.items(target)) if item.id == item_id]
            if positions:
                payload = splice(box, target, positions[0], 1, outcome="refused")
                assert payload is not None  # it removes one item
                seqs.append(session.append("agent/inbox/spliced", payload).seq)
                break
    return tuple(seqs)


async def ask_continue(
    session: Session,
    turn: int,
    step: int,
    settings: StepSettings,
    hooks: Hooks,
    reply_seq: int | None,
) -> Literal["continue", "stop", "error"]:
    """Ask ``should_continue`` (which must be set) after a step with no calls to run, and
    record the answer (before the caller appends ``step/end``)."""
    reply = session.window().event(reply_seq).data.message if reply_seq is not None else None
    ctx = StepContext(session, turn, step, settings, reply=reply)
    decided = await hooks.ask_should_continue(ctx)
    sources = () if reply_seq is None else (reply_seq,)
    session.append("agent/hook", decided.record, sources=sources)
    return decided.record.outcome  # type: ignore[return-value]  # one of the three


def may_continue(session: Session, result: StepResult, hooks: Hooks, cancelled: bool) -> bool:
    """Whether ``should_continue`` is asked after this step: it ended with no calls to run,
    the turn is not cancelled, and no waking input is queued for a next step."""
    return (
        hooks.should_continue is not None
        and result.kind in ("stop", "max-tokens")
        and not cancelled
        and not any(item.wake for item in inbox(session).next_step)
    )


def turn_ending(session: Session, result: StepResult, cancelled: bool) -> TurnEndReason | None:
    """How the turn ends after a step, or ``None`` when another step follows."""
    if result.kind in ("aborted", "error", "blocked"):
        return result.kind
    if cancelled:
        return "aborted"
    if result.kind == "continue" or (result.kind == "tools" and not result.concluded):
        return None
    if any(item.wake for item in inbox(session).next_step):
        return None  # steering arrived: the turn goes on
    return "completed"


def close_after_failure(session: Session, turn: int, step: int) -> None:
    """The loop itself failed: close the turn ``error`` if the log still takes it.

    A step with calls still unanswered is left open: closing it would leave a tool call
    without a result in the history; :func:`recovery.repair` answers them correctly.
    """
    try:
        view = timeline(session)
        if view.dangling:
            return
        if view.step is not None:
            session.append("step/end", StepEnd(turn=turn, step=step))
        session.append("turn/end", TurnEnd(turn=turn, reason="error"))
    except EventLogError:
        logger.exception("agent: could not close turn %d of %r", turn, session.id)
