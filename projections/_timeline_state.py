"""The timeline's types and its fold's mutable state (see :mod:`projections._timeline`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, NamedTuple

import msgspec

from eventlog import ApprovalDecision

__all__ = (
    "CallKey",
    "CallStatus",
    "Finding",
    "OpenStep",
    "OpenTurn",
    "TimelineState",
    "ToolCallState",
)

CallStatus = Literal[
    "proposed", "awaiting approval", "approved", "denied", "started", "completed", "resulted"
]
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
    :ivar requested: seq of its ``tool/approval-request`` (the call needs a decision).
    :ivar decided: seq of its ``tool/approval`` (the decision).
    :ivar decision: ``approve`` or ``deny``, once decided.
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
    requested: int | None = None
    decided: int | None = None
    decision: ApprovalDecision | None = None

    @property
    def key(self) -> CallKey:
        return CallKey(self.turn, self.step, self.call_id)

    @property
    def status(self) -> CallStatus:
        """The furthest state reached. Between ``proposed`` and ``started``, a call that needs
        a decision is ``awaiting approval`` until it gets one, then ``approved`` or ``denied``
        (a denied call never starts)."""
        if self.result is not None:
            return "resulted"
        if self.outcome is not None:
            return "completed"
        if self.call is not None:
            return "started"
        if self.decision is not None:
            return "approved" if self.decision == "approve" else "denied"
        if self.requested is not None:
            return "awaiting approval"
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
    """The fold's mutable state. Readers get ``Timeline`` snapshots, never this."""

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
        # Call key -> positions of its versions in ``versions`` (at most six, ascending).
        # Keys are plain ``(turn, step, call_id)`` tuples (equal to :class:`CallKey` s).
        self.history: dict[_Key, list[int]] = {}
        # The open step's calls in order of appearance; replaced (never cleared) at step
        # boundaries, so a snapshot may hold it with a captured length.
        self.step_calls: list[_Key] = []
        self.step_proposed = 0  # calls proposed so far in the open step
        # Ordered set of calls with no result yet.
        self.unanswered: dict[_Key, None] = {}
        self.findings: list[Finding] = []
        # The reader's view of this version (a ``Timeline``, made by ``_timeline``): typed
        # loosely so this module need not import the view's, which imports it.
        self.snapshot: object | None = None

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
        ``Timeline`` snapshots readers hold share its lists); the new one shares only the
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
