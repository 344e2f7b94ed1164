"""Which SDK run writes an ``EventlogSession``, and how a run's turn is closed when it does not
close it itself.

The SDK tells a session nothing when a run fails: ``RunHooks.on_agent_end`` is called only
when a run succeeds, and a run that raises (a model error, a tool that raises,
``MaxTurnsExceeded``, a cancellation) just stops calling. What it does pass, to a session whose
four methods accept it, is the run's ``RunContextWrapper`` (keyword ``wrapper``) on every call
it makes: one object per run (a run resumed from its ``RunState`` gets a copy, see
:func:`resumes`). So the session knows which run writes it, and the first call of a new run is
the moment to close what the previous one left open: a session has one writer, so a turn still
open then has nobody left to close it.

Imports no SDK.
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass
from typing import Any

import anyio

from eventlog import Session, StepEnd, TurnEnd, TurnEndReason
from projections import timeline
from recovery import repair, scan

from ._openai_agents_events import ITEMS

__all__ = (
    "HOOKED",
    "Left",
    "RunWatch",
    "close_left",
    "close_turn",
    "interrupted",
    "reason_of",
    "replied",
    "resumes",
)

#: Id prefix of a reply the hooks logged before the SDK added it.
HOOKED = "oa-hooks-"
#: The SDK's exceptions for a run stopped by a limit or a guardrail (matched by name: this
#: module imports no SDK): its turn ends ``blocked``, as the agent loop's does at ``max_steps``.
_BLOCKED = frozenset(
    {
        "MaxTurnsExceeded",
        "InputGuardrailTripwireTriggered",
        "OutputGuardrailTripwireTriggered",
        "ToolInputGuardrailTripwireTriggered",
        "ToolOutputGuardrailTripwireTriggered",
    }
)


@dataclass(frozen=True, slots=True)
class Left:
    """What the previous run left, seen when a new run first calls the session.

    :ivar tracked: this session object saw that run write (else the open turn, if any, was
        left by another process, or by an app writing its own history).
    :ivar hooked: ``EventlogHooks`` watched it, so its success would have been seen.
    :ivar ended: it ended through ``on_agent_end`` (its turn is closed ``completed``).
    :ivar cancelled: the task it ran in ended cancelled.
    """

    tracked: bool
    hooked: bool
    ended: bool
    cancelled: bool


class RunWatch:
    """The run writing a session: its ``RunContextWrapper`` (weakly held), whether hooks watch
    it, whether it ended, and whether the task it ran in was cancelled."""

    __slots__ = ("_cancelled", "_run", "_task", "ended", "hooked")

    def __init__(self) -> None:
        self._run: weakref.ref[Any] | None = None
        self._task: asyncio.Task[Any] | None = None
        self._cancelled = False
        self.hooked = False
        self.ended = False

    def enter(self, wrapper: object) -> Left | None:
        """Note a call made by the run ``wrapper``; when it is a new run, what the previous one
        left (``None`` for a call of the same run, or one made outside any run)."""
        if wrapper is None or (self._run is not None and self._run() is wrapper):
            return None
        if self._task is not None and self._task.done():  # its callback may not have run yet
            self._done(self._task)
        left = Left(self._run is not None, self.hooked, self.ended, self._cancelled)
        self._follow(wrapper)
        return left

    def is_new(self, wrapper: object) -> bool:
        """Whether a call by the run ``wrapper`` would be the first of a new run."""
        return wrapper is not None and (self._run is None or self._run() is not wrapper)

    def resume(self, left: Left) -> None:
        """The new run resumes the previous one (see :func:`resumes`): it carries on as it."""
        self.hooked, self.ended = left.hooked, left.ended

    @property
    def running(self) -> bool:
        """A run writes the session and has not ended (as far as the session can see)."""
        return self._run is not None and not self.ended

    def _follow(self, wrapper: object) -> None:
        if self._task is not None:
            self._task.remove_done_callback(self._done)
        try:
            self._run = weakref.ref(wrapper)
        except TypeError:  # a wrapper that takes no weak reference: held for the run
            self._run = lambda: wrapper  # type: ignore[assignment]
        self.hooked = self.ended = self._cancelled = False
        try:
            self._task = asyncio.current_task()
        except RuntimeError:  # not on asyncio: cancellation is not seen, failures still are
            self._task = None
        if self._task is not None:
            # A run cancelled with its task (``task.cancel()``, a task group's cancel scope)
            # is known by it. One callback per session: the next run
            # removes it, so a long-lived task does not collect them.
            self._task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        if task is self._task:  # not a callback scheduled before the next run took over
            self._cancelled = task.cancelled()
            self._task = None


def failure_reason(left: Left, *, replied: bool) -> TurnEndReason | None:
    """The ``turn/end`` reason of a turn the previous run left open, or ``None`` to leave it.

    - A run this session followed that did not end: it raised. ``aborted`` if its task was
      cancelled, else ``error``. Without hooks its success is not seen, so only a turn with
      no model reply is known to have failed; one with a reply is left to the next input to
      close ``completed``, as it always was.
    - A turn no run of this session object wrote is an app's own history (one a crash cut is
      repaired by ``EventlogSession.open``, see :func:`interrupted`): left as it is.
    """
    if left.tracked and not left.ended and (left.hooked or not replied):
        return "aborted" if left.cancelled else "error"
    return None


def resumes(log: Session, wrapper: Any) -> bool:
    """Whether the run ``wrapper`` resumes the run that left the open step: a run the SDK
    resumes from its ``RunState`` (after an interruption for approval) gets a copy of the
    paused run's context, a new object, holding the decision on a call the step awaits."""
    decided = getattr(wrapper, "is_tool_approved", None)
    step = timeline(log).step
    if step is None or not callable(decided):
        return False
    return any(decided(call.name, call.call_id) is not None for call in timeline(log).dangling)


def reason_of(error: BaseException) -> TurnEndReason:
    """The ``turn/end`` reason of a run that raised ``error``: ``aborted`` for a cancellation,
    ``blocked`` for the SDK's ``MaxTurnsExceeded`` and guardrail tripwires, else ``error``."""
    if isinstance(error, asyncio.CancelledError | anyio.get_cancelled_exc_class()):
        return "aborted"
    if any(cls.__name__ in _BLOCKED for cls in type(error).__mro__):
        return "blocked"
    return "error"


async def close_left(log: Session, left: Left) -> None:
    """Close the turn the previous run left open, with the reason :func:`failure_reason`
    gives (see :func:`close_turn`)."""
    line = timeline(log)
    if line.turn is None:
        return
    reason = failure_reason(left, replied=line.step is not None and replied(log, line.step.seq))
    if reason is not None:
        await close_turn(log, reason)


async def close_turn(log: Session, reason: TurnEndReason) -> None:
    """Close the open turn ``reason``, answering its unanswered calls as recovery does: a call
    that started ``TOOL_OUTCOME_UNKNOWN`` (a tool that raised, or was cancelled, may have
    acted), one that never started ``TOOL_NOT_STARTED``. Flushes what it appends."""
    line = timeline(log)
    if line.turn is None:
        return
    if line.dangling:
        await repair(log, reason=reason)
        return
    if line.step is not None:
        log.append("step/end", StepEnd(turn=line.step.turn, step=line.step.number))
    log.append("turn/end", TurnEnd(turn=line.turn.number, reason=reason))
    await log.flush()


async def interrupted(log: Session) -> bool:
    """Whether a crash cut a run short: the open step holds a run's input and no model reply
    (only a run's input opens a turn with a user message: the run never got its answer), or a
    call of the open step
    has its ``tool/call`` logged (only the hooks write one), or was proposed by a reply the
    hooks logged and the SDK never added (no ``openai_agents/items`` spells it). A call an app
    added without its output is the app's own history, not a crash: it is left as it is.

    The dangling calls come from the timeline (a snapshot's keeps them); their proposing
    replies and any spelling of them are in the open step, read from its first proposal on
    (from the store if the session was opened from a snapshot taken after it)."""
    step = timeline(log).step
    if step is not None and _holds(log, step.seq, "user/message") and not replied(log, step.seq):
        return True
    dangling = scan(log).dangling
    if any(call.call.call is not None for call in dangling):
        return True
    proposals = {c.call.proposed for c in dangling if c.call.proposed is not None}
    if not proposals:
        return False
    hooked: set[int] = set()
    spelled: set[int] = set()
    async for event in log.read_events(min(proposals)):
        if event.seq in proposals and event.data.message.id.startswith(HOOKED):
            hooked.add(event.seq)
        elif event.type == ITEMS and event.data.of is not None:
            spelled.add(event.data.of)
    return bool(hooked - spelled)


def replied(log: Session, start: int) -> bool:
    """Whether the step that began at ``start`` holds a model reply."""
    return _holds(log, start, "assistant/message")


def _holds(log: Session, start: int, type_: str) -> bool:
    """Whether the events from ``start`` on hold a surface event of ``type_``. Surface events
    are pinned, so a session opened from a snapshot taken inside the step holds them if they
    are older than the snapshot."""
    pinned = log.pinned
    if start < log.loaded_from and any(pinned[seq].type == type_ for seq in pinned if seq >= start):
        return True
    return any(e.type == type_ for e in log.window(max(start, log.loaded_from)))
