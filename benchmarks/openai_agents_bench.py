"""OpenAI Agents SDK: ``EventlogSession`` against the SDK's own ``SQLiteSession``.

Figures (issue 16, "Measure"): ``add_items`` per turn (turns per second of wall time, one call
per turn with the turn's items, as the Runner adds them) and reload time (a new session object
on the closed file, then ``get_items()``: what the next run does first), for sessions of
T = 100 and 1000 turns. A turn is the workload's (``benchmarks.workload``) as Responses-API
items: the user message, then per step the assistant ``message``, its ``function_call`` and the
``function_call_output``.

- ``EventlogSession`` on ``sqlite:///`` (``durability="power-loss"``: each ``add_items``
  returns once fsynced), items as core events plus the SDK's exact spelling;
- ``SQLiteSession`` (WAL, SQLite's default ``synchronous=FULL``: a commit per ``add_items``).

Runs alternate between the two, rotating the order; ratios are eventlog / SQLiteSession per run.
"""

from __future__ import annotations

import asyncio
import functools
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agents import SQLiteSession

from agent import compact
from agent.integrations.openai_agents import EventlogSession, openai_agents_types
from eventlog import Message, open_store

from ._harness import Figure, Stats, print_figure
from .peers.openai_agents_peer import turn_items

__all__ = ("SESSIONS", "main")

FULL = ((100, 5), (1000, 3))
QUICK = ((100, 2),)
_ID = "bench"
#: One run: (seconds adding, seconds reloading, items reloaded).
_Run = tuple[float, float, int]


def _eventlog(path: Path, turns: int) -> _Run:
    url = f"sqlite:///{path}"

    async def write() -> float:
        async with open_store(url, types=openai_agents_types()) as store:
            session = await EventlogSession.open(store, _ID)
            start = time.perf_counter()
            for turn in range(1, turns + 1):
                await session.add_items(turn_items(turn))
            seconds = time.perf_counter() - start
            await session.log.aclose()
        return seconds

    async def reload() -> tuple[float, int]:
        start = time.perf_counter()
        async with open_store(url, types=openai_agents_types()) as store:
            session = await EventlogSession.open(store, _ID)
            items = await session.get_items()
            seconds = time.perf_counter() - start
            await session.log.aclose()
        return seconds, len(items)

    adding = asyncio.run(write())
    return (adding, *asyncio.run(reload()))


def _sqlite(path: Path, turns: int) -> _Run:
    async def write() -> float:
        session = SQLiteSession(_ID, path)
        start = time.perf_counter()
        for turn in range(1, turns + 1):
            await session.add_items(turn_items(turn))
        seconds = time.perf_counter() - start
        session.close()
        return seconds

    async def reload() -> tuple[float, int]:
        start = time.perf_counter()
        session = SQLiteSession(_ID, path)
        items = await session.get_items()
        seconds = time.perf_counter() - start
        session.close()
        return seconds, len(items)

    adding = asyncio.run(write())
    return (adding, *asyncio.run(reload()))


SESSIONS: dict[str, Callable[[Path, int], _Run]] = {
    "EventlogSession": _eventlog,
    "SQLiteSession": _sqlite,
}


def _measure(turns: int, runs: int) -> dict[str, list[_Run]]:
    results: dict[str, list[_Run]] = {name: [] for name in SESSIONS}
    names = list(SESSIONS)
    for index in range(runs):
        for name in names[index % 2 :] + names[: index % 2]:
            with tempfile.TemporaryDirectory() as tmp:
                results[name].append(SESSIONS[name](Path(tmp) / "oa.db", turns))
    return results


def main(*, quick: bool = False) -> None:
    print("(one session; add_items once per turn, each durable; reload = open + get_items)")
    for turns, runs in QUICK if quick else FULL:
        results = _measure(turns, runs)
        for name, measured in results.items():
            rate = Stats(tuple(turns / adding for adding, _, _ in measured))
            load = Stats(tuple(reload * 1000 for _, reload, _ in measured))
            print_figure(Figure(f"T={turns}, {name}: add_items", rate, "turns/s"))
            print_figure(Figure(f"T={turns}, {name}: reload", load, "ms"))
        pairs = list(zip(results["EventlogSession"], results["SQLiteSession"], strict=True))
        speed = statistics.median(b[0] / a[0] for a, b in pairs)
        slower = statistics.median(a[1] / b[1] for a, b in pairs)
        print(
            f"T={turns}: EventlogSession / SQLiteSession: add_items throughput {speed:.2f}x, "
            f"reload time {slower:.2f}x",
            flush=True,
        )


# -- resume: one long, compacted session reopened (``python -m benchmarks openai_agents-resume``)

#: Events in the session and runs of each.
RESUME_FULL = ((20_000, 3), (100_000, 3))
RESUME_QUICK = ((5_000, 1),)
#: The Runner's ``SessionSettings(limit=...)`` in the limited figure.
_LIMIT = 50
#: Compact when the surface holds this many messages, down to the last turn's (as the agent's
#: automatic compaction keeps the surface short).
_COMPACT_AT = 60


async def _summary(shadowed: Sequence[Message]) -> str:
    return f"{len(shadowed)} earlier messages"


async def _write_session(url: str, events: int) -> None:
    """Turns of the workload added as the Runner adds them, compacted as the surface grows,
    until the log holds ``events`` events."""
    async with open_store(url, types=openai_agents_types(), durability="process-crash") as store:
        session = await EventlogSession.open(store, _ID)
        turn = 0
        while session.log.head + 1 < events:
            turn += 1
            await session.add_items(turn_items(turn))
            nodes = session.log.surface_index.nodes
            if len(nodes) >= _COMPACT_AT:
                session.end_turn()
                user = [s for s in nodes if session.log.window().event(s).type == "user/message"]
                await compact(session.log, nodes[0], nodes[nodes.index(user[-1]) - 1], _summary)
                await session.log.flush()
        await session.log.aclose()


def _resume(url: str, *, full: bool, limit: int | None) -> list[Any]:
    """Open the session (before: ``verify="full"``; now: ``EventlogSession.open``, from the
    snapshot) and read its items as the next run does first."""

    async def run() -> list[Any]:
        async with open_store(url, types=openai_agents_types()) as store:
            if full:
                session = EventlogSession(await store.open(_ID, verify="full"))
            else:
                session = await EventlogSession.open(store, _ID)
            items = await session.get_items(limit)
            await session.log.aclose()
            return items

    return asyncio.run(run())


def _traced(fn: Callable[[], list[Any]]) -> tuple[float, int, list[Any]]:
    """``fn()``'s wall time (untraced), then its peak traced memory (a second, traced run)
    and its answer."""
    start = time.perf_counter()
    fn()
    seconds = time.perf_counter() - start
    tracemalloc.start()
    try:
        result = fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return seconds, peak, result


def resume(*, quick: bool = False) -> None:
    """Resume one long session: open it and read its items, before (``verify="full"``) and
    now, with ``get_items()`` and with ``get_items(limit=50)``."""
    print(
        f"(one session of workload turns, compacted at {_COMPACT_AT} surface messages; "
        f"resume = open + get_items, all or the last {_LIMIT}; peak = tracemalloc, a separate run)"
    )
    for events, runs in RESUME_QUICK if quick else RESUME_FULL:
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{Path(tmp) / 'oa.db'}"
            asyncio.run(_write_session(url, events))
            for limit in (None, _LIMIT):
                measured: dict[str, list[tuple[float, int, list[Any]]]] = {}
                for name, full in (("before", True), ("now", False)):
                    run = functools.partial(_resume, url, full=full, limit=limit)
                    run()  # warm: imports, the page cache
                    measured[name] = [_traced(run) for _ in range(runs)]
                assert measured["now"][0][2] == measured["before"][0][2]  # the same items
                label = "all items" if limit is None else f"last {limit}"
                for name, results in measured.items():
                    load = Stats(tuple(seconds * 1000 for seconds, _, _ in results))
                    peak = Stats(tuple(peak / 2**20 for _, peak, _ in results))
                    print_figure(Figure(f"{events} events, {label}, {name}: resume", load, "ms"))
                    print_figure(Figure(f"{events} events, {label}, {name}: peak", peak, "MiB"))
