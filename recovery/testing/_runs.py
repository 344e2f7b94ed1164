"""Well-formed agent runs, generated: the events an agent would commit, and where it flushes.

A run is planned, not executed: :class:`AgentRun` holds the events in order (with the seqs
their ``Replace`` spans and ``sources`` refer to, counted from 0) and marks the semantic
checkpoints where the agent flushes (docs/recovery.md): before a model request is sent, after each
``tool/call`` (before the body runs), after each ``tool/outcome``, at step end and turn end.

What a run may contain: turns of one to three steps; inputs taken from the inbox or given
directly; parallel tool calls whose ``tool/call`` events interleave with other calls' finishes
in any order; bodies finishing out of the model's order (their results made durable as
``tool/outcome`` until their turn comes); failed model attempts; empty, interrupted and
``max-tokens`` replies; cancels (started calls drained, unstarted ones answered
``ABORTED_BEFORE_DISPATCH``); and, between turns, compaction replaces over balanced spans,
tool-result prunings, and inbox enqueues and cancels.

The same builder is driven by hypothesis (:func:`agent_runs`) or by a seeded
:class:`random.Random` (:func:`random_run`), so a child process in a crash test and its parent
can rebuild the same run from a seed.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from hypothesis import strategies as st

from eventlog import Session

from ._plan import Choose, PlannedEvent, plan

__all__ = ("AgentRun", "Choose", "PlannedEvent", "agent_runs", "build_run", "random_run")


@dataclass(frozen=True)
class AgentRun:
    """A planned agent run. Its seqs count from 0: play it into an empty session."""

    events: tuple[PlannedEvent, ...]

    def __len__(self) -> int:
        return len(self.events)

    def commit(self, session: Session, stop: int | None = None) -> None:
        """Append the run's events from ``session.head + 1`` up to ``stop`` (no flushing)."""
        for planned in self.events[session.head + 1 : stop]:
            _append(session, planned)

    async def play(
        self,
        session: Session,
        stop: int | None = None,
        *,
        on_flush: Callable[[int], object] | None = None,
    ) -> None:
        """Append the run's events from ``session.head + 1`` up to ``stop``, flushing at each
        checkpoint as the agent would, and once at the end.

        :param on_flush: called with ``session.durable`` after each flush returns.
        :raises StoreWriteError: a flush failed (the events stay committed and queued).
        """
        for planned in self.events[session.head + 1 : stop]:
            _append(session, planned)
            if planned.checkpoint:
                await session.flush()
                if on_flush is not None:
                    on_flush(session.durable)
        await session.flush()
        if on_flush is not None:
            on_flush(session.durable)

    def __repr__(self) -> str:
        return f"AgentRun({len(self.events)} events: {' '.join(e.type for e in self.events)})"


def _append(session: Session, planned: PlannedEvent) -> None:
    session.append(planned.type, planned.data, surface=planned.surface, sources=planned.sources)


@st.composite
def _runs(draw: st.DrawFn, max_turns: int, max_steps: int, max_calls: int) -> AgentRun:
    def choose(low: int, high: int) -> int:
        return draw(st.integers(low, high))

    return build_run(choose, max_turns=max_turns, max_steps=max_steps, max_calls=max_calls)


def agent_runs(
    *, max_turns: int = 3, max_steps: int = 3, max_calls: int = 3
) -> st.SearchStrategy[AgentRun]:
    """A hypothesis strategy of well-formed :class:`AgentRun` s (shrinks towards short runs)."""
    return _runs(max_turns, max_steps, max_calls)


def random_run(
    seed: int, *, max_turns: int = 3, max_steps: int = 3, max_calls: int = 3
) -> AgentRun:
    """The run a seeded :class:`random.Random` builds (the same seed gives the same run)."""
    rng = random.Random(seed)
    return build_run(rng.randint, max_turns=max_turns, max_steps=max_steps, max_calls=max_calls)


def build_run(
    choose: Choose, *, max_turns: int = 3, max_steps: int = 3, max_calls: int = 3
) -> AgentRun:
    """Build a run, taking every decision from ``choose``."""
    return AgentRun(plan(choose, max_turns=max_turns, max_steps=max_steps, max_calls=max_calls))
