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
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from agents import SQLiteSession

from agent.integrations.openai_agents import EventlogSession, openai_agents_types
from eventlog import open_store

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
