"""Recovery and timeline figures (``python -m benchmarks recovery``).

- ``timeline()`` read after every commit of the standard workload, beside no reads;
- ``scan`` and ``repair`` of a session of 16,000 and 160,000 events left open by a crash
  (the timeline caught up from cold, as right after ``open``), and ``scan`` once caught up;
- ``check_invariants`` on a 16,000-event session.
"""

from __future__ import annotations

import functools

import anyio

from eventlog import (
    APPEND,
    AssistantMessage,
    Message,
    Session,
    StepStart,
    ToolCallPart,
    TurnStart,
    open_store,
)
from eventlog.stores import LogStore
from projections import timeline
from recovery import repair, scan
from recovery.testing import check_invariants

from ._harness import Figure, Stats, print_figure, repeat, timed
from .workload import EVENTS_PER_TURN, append_turn, turn_events

__all__ = ("main",)


async def _session(store: LogStore, turns: int, *, open_turn: bool) -> Session:
    session = await store.create()
    for turn in range(1, turns + 1):
        append_turn(session, turn)
    if open_turn:
        # A crash inside a step: two calls proposed, one started.
        turn = turns + 1
        session.append("turn/start", TurnStart(turn=turn))
        session.append("step/start", StepStart(turn=turn, step=1))
        calls = tuple(ToolCallPart(id=f"c{i}", name="read", arguments="{}") for i in range(2))
        message = Message.assistant(tool_calls=calls)
        data = AssistantMessage(turn=turn, step=1, message=message, finish="tool-calls")
        session.append("assistant/message", data, surface=APPEND)
    await session.flush()  # what a crashed process left on disk
    return session


def _commit_rate(turns: int, *, reads: bool) -> float:
    async def measure() -> float:
        async with open_store("memory:", write_delay=3600) as store:
            session = await store.create()

            def work() -> None:
                for turn in range(1, turns + 1):
                    for type_, data, surface in turn_events(turn):
                        session.append(type_, data, surface=surface)
                        if reads:
                            timeline(session)

            return turns * EVENTS_PER_TURN / timed(work)

    return anyio.run(measure)


def _scan_repair(turns: int) -> tuple[float, float, float]:
    async def measure() -> tuple[float, float, float]:
        async with open_store("memory:", write_delay=3600) as store:
            session = await _session(store, turns, open_turn=True)
            session.projection_cache.clear()  # cold, as right after open
            cold = timed(lambda: scan(session))
            warm = timed(lambda: scan(session))
            start = anyio.current_time()
            await repair(session)
            return cold, warm, anyio.current_time() - start

    return anyio.run(measure)


def _check(turns: int) -> float:
    async def measure() -> float:
        async with open_store("memory:", write_delay=3600) as store:
            session = await _session(store, turns, open_turn=False)
            return timed(lambda: check_invariants(session))

    return anyio.run(measure)


def main(*, quick: bool = False) -> None:
    runs = 3 if quick else 5
    turns = 100 if quick else 1000
    for reads in (False, True):
        label = "timeline() after each commit" if reads else "no reads"
        stats = repeat(functools.partial(_commit_rate, turns, reads=reads), runs)
        print_figure(Figure(f"commit, memory:, {label}", stats, "events/s"))
    for events in (16_000, 160_000) if not quick else (16_000,):
        n = events // EVENTS_PER_TURN
        results = [_scan_repair(n) for _ in range(runs)]
        for i, name in enumerate(("scan, cold timeline", "scan, caught up", "repair (4 closers)")):
            stats = Stats(tuple(r[i] * 1000 for r in results))
            print_figure(Figure(f"{name}, {events:,} events", stats, "ms"))
    stats = repeat(lambda: _check(16_000 // EVENTS_PER_TURN) * 1000, runs)
    print_figure(Figure("check_invariants, 16,000 events", stats, "ms"))
