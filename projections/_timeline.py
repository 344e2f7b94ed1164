"""The timeline projection: the open turn and step, numbering, and every tool call's state.

See docs/architecture.md. A tool call moves through up to four states, each proven by the seq
of one event:

``proposed``
    the model asked for it (a ``ToolCallPart`` in an appended ``assistant/message``);
``started``
    ``tool/call`` was logged (the body may have run);
``completed``
    ``tool/outcome`` was logged (the body ran; its result is durable);
``resulted``
    ``tool/result`` was logged (the model will see the answer).

These are the names of a call's state everywhere: recovery's ``DanglingKind`` is the first three.

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

from collections.abc import Iterable
from typing import Literal, NamedTuple

import msgspec

from eventlog import Event, Replace, Session, ToolCallPart, ToolResultPart

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

CallStatus = Literal["proposed", "started", "completed", "resulted"]
_Key = tuple[int, int, str]


class CallKey(NamedTuple):
    """Identifies one tool call: the step that proposed it and the model's call id."""

    turn: int
    step: int
    call_id: str


class ToolCallState(msgspec.Struct, frozen=True, kw_only=True):
    """Where one tool call stands, with the seq of the event that proves each state.

    :ivar index: position among the calls proposed in its step (the model's order); ``None``
        when the call was never proposed (a finding).
    :ivar proposed: seq of the ``assistant/message`` proposing it.
    :ivar call: seq of its ``tool/call``.
    :ivar outcome: seq of its ``tool/outcome``.
    :ivar result: seq of its ``tool/result`` (the first one appended; pruning replaces are
        not answers).
    """

    turn: int
    step: int
    call_id: str
    name: str
    index: int | None = None
    proposed: int | None = None
    call: int | None = None
    outcome: int | None = None
    result: int | None = None

    @property
    def key(self) -> CallKey:
        return CallKey(self.turn, self.step, self.call_id)

    @property
    def status(self) -> CallStatus:
        """The furthest state reached."""
        if self.result is not None:
            return "resulted"
        if self.outcome is not None:
            return "completed"
        if self.call is not None:
            return "started"
        return "proposed"


class OpenTurn(msgspec.Struct, frozen=True, kw_only=True):
    """The turn that has started and not ended; ``seq`` is its ``turn/start``."""

    number: int
    seq: int


class OpenStep(msgspec.Struct, frozen=True, kw_only=True):
    """The step that has started and not ended; ``seq`` is its ``step/start``."""

    turn: int
    number: int
    seq: int


class Finding(msgspec.Struct, frozen=True, kw_only=True):
    """An event that breaks the timeline's rules; ``message`` names the seq and the rule."""

    seq: int
    message: str


class TimelineState:
    """The fold's mutable state. Readers get :class:`Timeline` snapshots, never this."""

    __slots__ = (
        "findings",
        "history",
        "last_step",
        "last_turn",
        "seq",
        "snapshot",
        "step",
        "step_calls",
        "step_proposed",
        "turn",
        "unanswered",
        "versions",
    )

    def __init__(self) -> None:
        self.seq = -1
        self.turn: OpenTurn | None = None
        self.step: OpenStep | None = None
        self.last_turn = 0
        self.last_step = 0
        # Append-only: every state any call passed through, in the order it was reached.
        self.versions: list[ToolCallState] = []
        # Call key -> positions of its versions in ``versions`` (at most four, ascending).
        # Keys are plain ``(turn, step, call_id)`` tuples (equal to :class:`CallKey` s).
        self.history: dict[_Key, list[int]] = {}
        # The open step's calls in order of appearance; replaced (never cleared) at step
        # boundaries, so a snapshot may hold it with a captured length.
        self.step_calls: list[_Key] = []
        self.step_proposed = 0  # calls proposed so far in the open step
        # Ordered set of calls with no result yet.
        self.unanswered: dict[_Key, None] = {}
        self.findings: list[Finding] = []
        self.snapshot: Timeline | None = None

    def latest(self, key: _Key) -> ToolCallState | None:
        positions = self.history.get(key)
        return self.versions[positions[-1]] if positions else None

    def put(self, key: _Key, state: ToolCallState) -> None:
        positions = self.history.get(key)
        if positions is None:
            self.history[key] = [len(self.versions)]
        else:
            positions.append(len(self.versions))
        self.versions.append(state)

    def find(self, seq: int, message: str) -> None:
        self.findings.append(Finding(seq=seq, message=f"seq {seq}: {message}"))

    def held_calls(self) -> list[ToolCallState]:
        """The latest state of each call that can still change: the open step's, then the
        other unanswered ones (what a snapshot carries, in this order)."""
        keys = dict.fromkeys([*self.step_calls, *self.unanswered])
        return [found for key in keys if (found := self.latest(key)) is not None]

    @classmethod
    def restore(
        cls,
        *,
        seq: int,
        turn: OpenTurn | None,
        step: OpenStep | None,
        last_turn: int,
        last_step: int,
        step_calls: list[_Key],
        step_proposed: int,
        unanswered: Iterable[_Key],
        calls: Iterable[ToolCallState],
        findings: list[Finding],
    ) -> TimelineState:
        """A state holding only what a snapshot carries (one version of each call given), as
        a session opened from that snapshot starts from it."""
        state = cls()
        state.seq, state.turn, state.step = seq, turn, step
        state.last_turn, state.last_step = last_turn, last_step
        for call in calls:
            state.put((call.turn, call.step, call.call_id), call)
        state.step_calls, state.step_proposed = step_calls, step_proposed
        state.unanswered = dict.fromkeys(unanswered)
        state.findings = findings
        return state

    def trimmed(self) -> TimelineState:
        """A new state that holds what a snapshot at :attr:`seq` carries of this one, and
        nothing else: the numbering, the open turn and step, every finding, and the calls
        that can still change (:meth:`held_calls`). What a live session keeps when it trims
        at a snapshot (``SnapshotState.trim``): the answered calls of closed steps, and the
        versions only they used, are forgotten. This state is left as it is (the
        :class:`Timeline` snapshots readers hold share its lists); the new one shares only the
        append-only findings list (a snapshot holds it with a captured length)."""
        return TimelineState.restore(
            seq=self.seq,
            turn=self.turn,
            step=self.step,
            last_turn=self.last_turn,
            last_step=self.last_step,
            step_calls=list(self.step_calls),
            step_proposed=self.step_proposed,
            unanswered=self.unanswered,
            calls=self.held_calls(),
            findings=self.findings,
        )


class Timeline:
    """An immutable snapshot of the timeline after event ``seq``. On a session opened from, or
    trimmed at, a snapshot, :meth:`call` and :meth:`calls` forget the answered calls of steps
    that had ended (see the module docstring); the rest is what a full replay answers as long
    as no later event names a forgotten call (in a log the agent writes, none does).

    :ivar seq: the last event folded in (-1 for an empty log).
    :ivar turn: the open turn, or ``None``.
    :ivar step: the open step, or ``None``.
    :ivar next_turn: the number the next ``turn/start`` must carry.
    :ivar next_step: the number the next ``step/start`` must carry (1 when no turn is open).
    """

    __slots__ = (
        "_findings",
        "_history",
        "_length",
        "_nfindings",
        "_nstep",
        "_step_calls",
        "_unanswered",
        "_versions",
        "next_step",
        "next_turn",
        "seq",
        "step",
        "turn",
    )

    def __init__(self, state: TimelineState) -> None:
        # O(1) apart from the unanswered keys (a handful): everything else is captured as an
        # append-only list plus its length, and resolved when read.
        self.seq = state.seq
        self.turn = state.turn
        self.step = state.step
        self.next_turn = state.last_turn + 1
        self.next_step = state.last_step + 1 if state.turn is not None else 1
        self._versions = state.versions
        self._history = state.history
        self._length = len(state.versions)
        self._findings = state.findings
        self._nfindings = len(state.findings)
        self._step_calls = state.step_calls  # replaced, never cleared, when a step ends
        self._nstep = len(state.step_calls)
        self._unanswered = tuple(state.unanswered) if state.unanswered else ()

    @property
    def open_calls(self) -> tuple[ToolCallState, ...]:
        """The calls of the open step, in the order they appeared (proposals in the model's
        order); empty when no step is open."""
        return self._resolve(self._step_calls[: self._nstep])

    @property
    def unanswered(self) -> tuple[ToolCallState, ...]:
        """Every proposed call with no ``tool/result`` yet, in any step (the open one's, which
        are :attr:`dangling`, and those of steps that ended without answering them), oldest
        first."""
        return self._resolve(self._unanswered)

    def _resolve(self, keys: Iterable[tuple[int, int, str]]) -> tuple[ToolCallState, ...]:
        found = (self.call(*key) for key in keys)
        return tuple(state for state in found if state is not None)

    @property
    def findings(self) -> tuple[Finding, ...]:
        """Events that broke the numbering or pairing rules, in seq order."""
        return tuple(self._findings[: self._nfindings])

    @property
    def dangling(self) -> tuple[ToolCallState, ...]:
        """The open step's proposed calls with no result yet, in the model's order."""
        calls = [c for c in self.open_calls if c.result is None and c.index is not None]
        calls.sort(key=lambda c: (c.proposed, c.index))
        return tuple(calls)

    def call(self, turn: int, step: int, call_id: str) -> ToolCallState | None:
        """The state of one call as of this snapshot, or ``None`` if it had not appeared, or
        if it was answered in a step that had ended before the snapshot this session was
        opened from, or last trimmed at (see the module docstring)."""
        positions = self._history.get((turn, step, call_id))
        if positions is None:
            return None
        for position in reversed(positions):
            if position < self._length:
                return self._versions[position]
        return None

    def calls(self) -> tuple[ToolCallState, ...]:
        """Every call as of this snapshot, in the order calls first appeared (O(calls)). On a
        session opened from, or trimmed at, a snapshot: those the snapshot carried (the open
        step's, then the other unanswered ones) and those since, not the answered calls of
        steps that had ended before it (see the module docstring)."""
        return self._resolve(self._history)

    def _identity(self) -> tuple[object, ...]:
        return (
            self.seq,
            self.turn,
            self.step,
            self.next_turn,
            self.next_step,
            self.open_calls,
            self.unanswered,
            self.calls(),
            self.findings,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Timeline):
            return NotImplemented
        return self._identity() == other._identity()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        turn = self.turn.number if self.turn else None
        step = self.step.number if self.step else None
        return (
            f"<Timeline seq={self.seq} turn={turn} step={step} "
            f"dangling={[c.call_id for c in self.dangling]} findings={self._nfindings}>"
        )


class TimelineProjection:
    """The timeline fold (see :mod:`projections.base`)."""

    key = "projections.timeline"

    def initial(self) -> TimelineState:
        return TimelineState()

    def apply(self, state: TimelineState, event: Event) -> TimelineState:
        state.snapshot = None
        state.seq = event.seq
        handler = _HANDLERS.get(event.type)
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
    if snapshot is None:
        snapshot = state.snapshot = Timeline(state)
    return snapshot


# -- the fold, one handler per event type ----------------------------------------------------


def _turn_start(state: TimelineState, event: Event) -> None:
    number: int = event.data.turn
    if state.turn is not None:
        state.find(event.seq, f"turn/start {number} while turn {state.turn.number} is open")
    if number != state.last_turn + 1:
        state.find(event.seq, f"turn/start numbers turn {number}, expected {state.last_turn + 1}")
    state.turn = OpenTurn(number=number, seq=event.seq)
    state.step = None
    state.step_calls, state.step_proposed = [], 0
    state.last_turn = max(state.last_turn, number)
    state.last_step = 0


def _turn_end(state: TimelineState, event: Event) -> None:
    number: int = event.data.turn
    if state.turn is None:
        state.find(event.seq, f"turn/end {number} with no open turn")
    elif state.turn.number != number:
        state.find(event.seq, f"turn/end {number} while turn {state.turn.number} is open")
    if state.step is not None:
        state.find(event.seq, f"turn/end {number} while step {state.step.number} is open")
    state.turn = None
    state.step = None
    state.step_calls, state.step_proposed = [], 0


def _step_start(state: TimelineState, event: Event) -> None:
    turn: int = event.data.turn
    number: int = event.data.step
    if state.turn is None or state.turn.number != turn:
        state.find(event.seq, f"step/start {turn}.{number} outside turn {turn}")
    if state.step is not None:
        state.find(event.seq, f"step/start {turn}.{number} while step {state.step.number} is open")
    if number != state.last_step + 1:
        state.find(event.seq, f"step/start numbers step {number}, expected {state.last_step + 1}")
    state.step = OpenStep(turn=turn, number=number, seq=event.seq)
    state.step_calls, state.step_proposed = [], 0
    state.last_step = max(state.last_step, number)


def _step_end(state: TimelineState, event: Event) -> None:
    turn: int = event.data.turn
    number: int = event.data.step
    step = state.step
    if step is None or (step.turn, step.number) != (turn, number):
        state.find(event.seq, f"step/end {turn}.{number} does not close the open step")
    state.step = None
    state.step_calls, state.step_proposed = [], 0


def _in_open_step(state: TimelineState, event: Event, turn: int, step: int) -> bool:
    open_step = state.step
    if open_step is None or (open_step.turn, open_step.number) != (turn, step):
        state.find(event.seq, f"{event.type} for step {turn}.{step} outside the open step")
        return False
    return True


def _assistant_message(state: TimelineState, event: Event) -> None:
    if isinstance(event.surface, Replace):
        return  # a replacement proposes nothing new (the surface refuses unbalanced ones)
    data = event.data
    calls = [part for part in data.message.content if type(part) is ToolCallPart]
    if not calls:
        return
    turn: int = data.turn
    step: int = data.step
    in_step = _in_open_step(state, event, turn, step)
    index = state.step_proposed if in_step else _proposed_in(state, turn, step)
    for part in calls:
        key = (turn, step, part.id)
        known = state.latest(key)
        if known is not None and known.proposed is not None:
            state.find(event.seq, f"call {part.id!r} of step {turn}.{step} proposed twice")
            continue
        if known is not None:
            state.find(
                event.seq,
                f"call {part.id!r} was started at seq {known.call} before it was proposed",
            )
            state.put(key, msgspec.structs.replace(known, index=index, proposed=event.seq))
            if known.result is None:
                state.unanswered[key] = None
        else:
            state.put(
                key,
                ToolCallState(
                    turn=turn,
                    step=step,
                    call_id=part.id,
                    name=part.name,
                    index=index,
                    proposed=event.seq,
                ),
            )
            if in_step:
                state.step_calls.append(key)
            state.unanswered[key] = None
        index += 1
    if in_step:
        state.step_proposed = index


def _proposed_in(state: TimelineState, turn: int, step: int) -> int:
    """How many calls were proposed in a step that is not the open one (a finding; rare)."""
    return sum(
        1
        for key in state.history
        if key[:2] == (turn, step) and (s := state.latest(key)) is not None and s.index is not None
    )


def _tool_call(state: TimelineState, event: Event) -> None:
    data = event.data
    key = (data.turn, data.step, data.call_id)
    _in_open_step(state, event, data.turn, data.step)
    known = state.latest(key)
    if known is None:
        state.find(event.seq, f"tool/call {data.call_id!r} was never proposed")
        called = ToolCallState(
            turn=data.turn, step=data.step, call_id=data.call_id, name=data.name, call=event.seq
        )
        state.put(key, called)
        if state.step is not None and (state.step.turn, state.step.number) == key[:2]:
            state.step_calls.append(key)
        return
    if known.call is not None:
        state.find(event.seq, f"tool/call {data.call_id!r} already logged at seq {known.call}")
        return
    state.put(key, msgspec.structs.replace(known, call=event.seq))


def _tool_outcome(state: TimelineState, event: Event) -> None:
    data = event.data
    key = (data.turn, data.step, data.call_id)
    _in_open_step(state, event, data.turn, data.step)
    known = state.latest(key)
    if known is None or known.call is None:
        state.find(event.seq, f"tool/outcome for {data.call_id!r} without a tool/call")
        if known is None:
            return
    if known.outcome is not None:
        state.find(
            event.seq, f"tool/outcome {data.call_id!r} already logged at seq {known.outcome}"
        )
        return
    state.put(key, msgspec.structs.replace(known, outcome=event.seq))


def _tool_result(state: TimelineState, event: Event) -> None:
    if isinstance(event.surface, Replace):
        return  # pruning: the surface checked it shadows exactly one result of the same call
    data = event.data
    content = data.message.content
    if len(content) != 1 or type(content[0]) is not ToolResultPart:
        parts = [part for part in content if type(part) is ToolResultPart]
        state.find(event.seq, f"tool/result carries {len(parts)} tool results, expected 1")
        if not parts:
            return
        content = parts
    call_id: str = content[0].call_id
    key = (data.turn, data.step, call_id)
    _in_open_step(state, event, data.turn, data.step)
    known = state.latest(key)
    if known is None or known.proposed is None:
        state.find(event.seq, f"tool/result answers {call_id!r}, which was never proposed")
        if known is None:
            return
    if known.result is not None:
        state.find(
            event.seq, f"tool/result answers {call_id!r} again (first at seq {known.result})"
        )
        return
    state.put(key, msgspec.structs.replace(known, result=event.seq))
    state.unanswered.pop(key, None)


_HANDLERS = {
    "turn/start": _turn_start,
    "turn/end": _turn_end,
    "step/start": _step_start,
    "step/end": _step_end,
    "assistant/message": _assistant_message,
    "tool/call": _tool_call,
    "tool/outcome": _tool_outcome,
    "tool/result": _tool_result,
}
