"""Projections: the cost of reading them, live and after a cold open (docs/architecture.md).

- ``messages()`` per call on a long session: must not grow with history length (16,000 and
  160,000 events side by side).
- Commit throughput with ``messages()``, ``inbox()`` and ``timeline()`` read after every commit,
  beside the same loop without reads (standard workload, memory store, writer out of the way).
- Time to rebuild all projections after ``open`` (first read of surface, messages, inbox and
  timeline: a fold over the whole log), and ``open`` itself, for 16,000 and 160,000 events.

Clock: CPU time of this process (``time.process_time``), so that other processes on a shared
machine do not inflate the figures; everything measured here is in-process CPU work.
"""

from __future__ import annotations

import time
from functools import partial

import anyio

from eventlog import Session, open_store
from eventlog.stores import MemoryData
from projections import inbox, messages, surface, timeline

from ._harness import Figure, Stats, print_figure, repeat
from .workload import EVENTS_PER_TURN, TurnEvent, append_turn, turn_events

__all__ = ("commit_with_reads", "main", "messages_call_cost", "rebuild_on_open")

_NO_WRITER = {"write_delay": 60, "max_pending_bytes": 1 << 40}


def _filled(session: Session, events: int) -> None:
    for turn in range(1, events // EVENTS_PER_TURN + 1):
        append_turn(session, turn)


async def messages_call_cost(events: int, calls: int = 200_000) -> float:
    """Nanoseconds per ``messages(session)`` call on a caught-up session of ``events`` events."""
    async with open_store("memory:", **_NO_WRITER) as store:
        session = await store.create()
        _filled(session, events)
        messages(session)  # catch up once; the figure is the steady-state read
        start = time.process_time()
        for _ in range(calls):
            messages(session)
        return (time.process_time() - start) / calls * 1e9


async def commit_with_reads(turns: int, *, reads: bool) -> float:
    """Events per second committed, optionally reading three projections after each commit."""
    events: list[TurnEvent] = [e for turn in range(1, turns + 1) for e in turn_events(turn)]
    async with open_store("memory:", **_NO_WRITER) as store:
        session = await store.create()
        session.subscribe(lambda _event: None)  # as in the core benchmark: one observer
        append = session.append
        start = time.process_time()
        if reads:
            for type_, data, op in events:
                append(type_, data, surface=op)
                messages(session)
                inbox(session)
                timeline(session)
        else:
            for type_, data, op in events:
                append(type_, data, surface=op)
        elapsed = time.process_time() - start
    return len(events) / elapsed


async def rebuild_on_open(events: int, runs: int) -> tuple[Stats, Stats]:
    """Seconds to open a stored session, and to rebuild every projection after that open."""
    data = MemoryData()
    async with open_store("memory:", data=data, **_NO_WRITER) as store:
        session = await store.create(session_id="bench")
        _filled(session, events)
        await session.aclose()
    opens: list[float] = []
    rebuilds: list[float] = []
    for _ in range(runs):
        async with open_store("memory:", data=data.restarted(), **_NO_WRITER) as store:
            start = time.process_time()
            again = await store.open("bench")
            opened = time.process_time()
            surface(again)
            messages(again)
            inbox(again)
            timeline(again)
            done = time.process_time()
            assert len(messages(again)) == events // EVENTS_PER_TURN * 7
            await again.aclose()
        opens.append(opened - start)
        rebuilds.append(done - opened)
    return Stats(tuple(opens)), Stats(tuple(rebuilds))


def main(quick: bool = False) -> None:
    runs = 3 if quick else 7
    sizes = (16_000,) if quick else (16_000, 160_000)
    for events in sizes:
        print_figure(
            Figure(
                f"messages() per call, {events:,}-event session",
                repeat(partial(anyio.run, messages_call_cost, events), runs),
                "ns",
                target="flat in history length",
            )
        )
    turns = 200 if quick else 1000
    n = turns * EVENTS_PER_TURN
    for reads in (False, True):
        label = "messages()+inbox()+timeline() after each" if reads else "no reads"
        commit = partial(commit_with_reads, turns, reads=reads)
        print_figure(
            Figure(
                f"commit throughput, {label} ({n:,} events)",
                repeat(partial(anyio.run, commit), runs),
                "events/s",
                target="≥100,000" if reads else "",
            )
        )
    for events in sizes:
        opens, rebuilds = anyio.run(rebuild_on_open, events, 3 if events > 20_000 else runs)
        print_figure(Figure(f"open (load, verify, surface), {events:,} events", opens, "s"))
        print_figure(
            Figure(f"rebuild all projections after open, {events:,} events", rebuilds, "s")
        )
