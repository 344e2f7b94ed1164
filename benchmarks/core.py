"""Commit throughput on the memory store: the cost of ``Session.append`` itself.

Standard agent workload (18 events per turn), validation on, one observer subscribed, payloads
built before the clock starts (the figure is the log's cost, not the app's).
"""

from __future__ import annotations

import time

import anyio

from eventlog import open_store

from ._harness import Figure, Stats, print_figure
from .workload import EVENTS_PER_TURN, TurnEvent, turn_events

__all__ = ("commit_throughput", "main")


def _prepared(turns: int) -> list[TurnEvent]:
    return [event for turn in range(1, turns + 1) for event in turn_events(turn)]


async def commit_throughput(turns: int, *, observers: int = 1) -> float:
    """Events per second committed (validated, stored, queued, observed) on ``memory:``."""
    events = _prepared(turns)
    # A large backlog ceiling and a long write delay keep the writer out of the measurement.
    async with open_store("memory:", write_delay=60, max_pending_bytes=1 << 40) as store:
        session = await store.create()
        seen = [0]

        def observer(_event: object) -> None:
            seen[0] += 1

        for _ in range(observers):
            session.subscribe(observer)
        append = session.append
        start = time.perf_counter()
        for type_, data, surface in events:
            append(type_, data, surface=surface)
        elapsed = time.perf_counter() - start
        assert seen[0] == len(events) * observers
    return len(events) / elapsed


def main(quick: bool = False) -> None:
    turns = 200 if quick else 1000
    runs = 3 if quick else 7
    values = [anyio.run(commit_throughput, turns) for _ in range(runs)]
    print_figure(
        Figure(
            f"commit throughput, memory store, 1 observer ({turns * EVENTS_PER_TURN:,} events)",
            Stats(tuple(values)),
            "events/s",
            target="≥150,000 (aim 250,000)",
        )
    )
