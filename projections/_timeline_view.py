"""The timeline's reader-facing snapshot (see :mod:`projections._timeline`)."""

from __future__ import annotations

from collections.abc import Iterable

from ._timeline_state import Finding, TimelineState, ToolCallState

__all__ = ("Timeline",)


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
    def awaiting_approval(self) -> tuple[ToolCallState, ...]:
        """The open step's calls that wait for a decision (``awaiting approval``), in the
        model's order. While any does, the step waits: nothing needs repair."""
        return tuple(c for c in self.dangling if c.status == "awaiting approval")

    @property
    def approvals(self) -> tuple[ToolCallState, ...]:
        """The open step's calls that asked for a decision (decided, answered or not), in the
        model's order: a step holding any is continued by the agent, not repaired on
        resume."""
        return tuple(c for c in self._proposed() if c.requested is not None)

    @property
    def dangling(self) -> tuple[ToolCallState, ...]:
        """The open step's proposed calls with no result yet, in the model's order."""
        return tuple(c for c in self._proposed() if c.result is None)

    def _proposed(self) -> list[ToolCallState]:
        """The open step's proposed calls, in the model's order (the proposing reply's seq,
        then the call's index in it)."""
        calls = [c for c in self.open_calls if c.index is not None]
        calls.sort(key=lambda c: (c.proposed, c.index))
        return calls

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
