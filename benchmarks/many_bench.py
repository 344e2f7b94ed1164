"""Many sessions: N concurrent agents in one process on one store, group commit under load.

Figures (issue 19, "Many sessions"): N = 16, 256 and 1,024 sessions run at once in one event
loop, each running 6 agent steps (two standard turns of ``benchmarks.workload``: 36 events) and
flushing at the agent's three durable checkpoints per step — before the model request (after
``step/start``), after ``tool/call`` and at step end (after ``step/end``, and ``turn/end`` when
the turn ends there): 18 flushes per session. Reported: aggregate events/s and steps/s (wall
time from all agents starting to the last one done), p50 and p99 flush latency, and how many
flushes raised ``StoreWriteError`` or "database is locked" (must be 0).

The same work against:

- raw ``sqlite3`` inserting the same rows (the store's own columns, payload bytes and hashes,
  precomputed) in ONE transaction: the floor the issue names; in one transaction per
  checkpoint wave (18 commits, each holding every session's rows of that checkpoint: the
  fewest durable commits with which each agent's checkpoint is durable before its next one,
  what group commit can reach at best); and with one transaction per flush per session
  (18 x N commits, sessions interleaved), for context. WAL, ``synchronous=FULL`` (as the
  store's ``durability="power-loss"``);
- openai-agents ``SQLiteSession`` (one per session on the same file, ``add_items`` at each
  checkpoint with the items it adds: a checkpoint that adds no item is the SDK's own no-op);
- langgraph-checkpoint-sqlite ``AsyncSqliteSaver`` (one saver shared by the tasks, an ``aput``
  at every checkpoint, each its own commit) and ``SqliteSaver`` (one saver, ``put`` from worker
  threads via ``anyio.to_thread``); both WAL with SQLite's default ``synchronous=FULL``;
- the PostgreSQL store (``synchronous_commit=on``, a fresh schema per run) against raw
  ``asyncpg`` inserting the same rows in one transaction, and with one transaction per flush.

Each figure is the median of several runs with the min–max spread; runs rotate the order of
the contenders. Results on this machine are in ``benchmarks/MANY.md``.
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import anyio.lowlevel
import anyio.to_thread

from eventlog import EventLogError, open_store
from eventlog._codec import Row
from eventlog.stores import MemoryData

from ._harness import Figure, Stats, print_figure
from .workload import TurnEvent, turn_events

__all__ = ("CHECKPOINTS", "main", "run_eventlog")

TURNS = 2  # 6 steps
FULL = ((16, 5), (256, 3), (1024, 1))
QUICK = ((16, 2), (256, 1))
_ROWS_TABLE = """
CREATE TABLE events (
    session_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, time INTEGER NOT NULL,
    surface TEXT, sources TEXT NOT NULL, ignorable INTEGER NOT NULL, data TEXT NOT NULL,
    hash BLOB NOT NULL, PRIMARY KEY (session_id, seq)
)
"""
_ROWS_INSERT = (
    "INSERT INTO events (session_id, seq, type, time, surface, sources, ignorable, data, hash) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, CAST(? AS TEXT), ?)"
)


def _checkpoints() -> list[list[TurnEvent]]:
    """The events of one session, cut at its durable checkpoints (18 groups of 36 events)."""
    groups: list[list[TurnEvent]] = []
    current: list[TurnEvent] = []
    for turn in range(1, TURNS + 1):
        events = list(turn_events(turn))
        for index, event in enumerate(events):
            current.append(event)
            following = events[index + 1][0] if index + 1 < len(events) else None
            if event[0] in ("step/start", "tool/call", "turn/end") or (
                event[0] == "step/end" and following != "turn/end"
            ):
                groups.append(current)
                current = []
    assert not current and len(groups) == 18
    return groups


#: The workload of one session: built once, the same payload objects for every session.
CHECKPOINTS = _checkpoints()
EVENTS = sum(len(group) for group in CHECKPOINTS)
STEPS = 3 * TURNS


class Run(NamedTuple):
    """One run of N sessions: wall seconds, each flush's seconds, failed flushes."""

    wall: float
    flushes: list[float]
    errors: int


async def _agents(
    count: int, checkpoint: Callable[[int, int], Awaitable[None]], *, catch: type[BaseException]
) -> Run:
    """Run ``count`` agents at once; agent ``i`` calls ``checkpoint(i, group)`` per group."""
    go = anyio.Event()
    flushes: list[float] = []
    errors = 0

    async def agent(index: int) -> None:
        nonlocal errors
        await go.wait()
        for group in range(len(CHECKPOINTS)):
            start = time.perf_counter()
            try:
                await checkpoint(index, group)
            except catch:
                errors += 1
            flushes.append(time.perf_counter() - start)

    async with anyio.create_task_group() as tg:
        for index in range(count):
            tg.start_soon(agent, index)
        await anyio.lowlevel.checkpoint()
        start = time.perf_counter()
        go.set()
    return Run(time.perf_counter() - start, flushes, errors)


async def run_eventlog(url: str, count: int, **options: Any) -> Run:
    """``count`` eventlog sessions on the store at ``url``: append each group, then flush."""
    async with open_store(url, **options) as store:
        sessions = [await store.create(session_id=f"s{i}") for i in range(count)]

        async def checkpoint(index: int, group: int) -> None:
            session = sessions[index]
            for type_, data, surface in CHECKPOINTS[group]:
                session.append(type_, data, surface=surface)
            await session.flush()

        return await _agents(count, checkpoint, catch=EventLogError)


# -- raw sqlite3 ---------------------------------------------------------------------------------


async def _store_rows() -> list[list[Row]]:
    """The rows the store writes for one session, grouped per checkpoint."""
    data = MemoryData()
    async with open_store("memory:", data=data) as store:
        session = await store.create(session_id="raw")
        for group in CHECKPOINTS:
            for type_, payload, surface in group:
                session.append(type_, payload, surface=surface)
        await session.flush()
    rows, grouped = data.rows["raw"], []
    for group in CHECKPOINTS:
        grouped.append(rows[: len(group)])
        rows = rows[len(group) :]
    return grouped


def _params(sid: str, rows: list[Row]) -> list[tuple[Any, ...]]:
    return [
        (sid, r.seq, r.type, r.time, r.surface, r.sources, r.ignorable, r.data, r.hash)
        for r in rows
    ]


def _raw_sqlite(path: Path, count: int, grouped: list[list[Row]], *, mode: str) -> Run:
    """Raw ``sqlite3`` writing the rows of ``count`` sessions: ``mode`` is ``"one"`` (every row
    in one transaction), ``"wave"`` (one transaction per checkpoint holding every session's
    rows of it: the fewest durable commits with which each checkpoint is durable before the
    next is written, what group commit does at best) or ``"per-flush"`` (one per session and
    checkpoint)."""
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    connection.execute(_ROWS_TABLE)
    # Parameters built before the clock starts: only the inserts and commits are timed.
    params = [[_params(f"s{i}", rows) for rows in grouped] for i in range(count)]
    flushes: list[float] = []
    start = time.perf_counter()
    if mode == "per-flush":
        for group in range(len(grouped)):
            for i in range(count):
                began = time.perf_counter()
                connection.execute("BEGIN IMMEDIATE")
                connection.executemany(_ROWS_INSERT, params[i][group])
                connection.execute("COMMIT")
                flushes.append(time.perf_counter() - began)
    elif mode == "wave":
        for group in range(len(grouped)):
            connection.execute("BEGIN IMMEDIATE")
            for i in range(count):
                connection.executemany(_ROWS_INSERT, params[i][group])
            connection.execute("COMMIT")
    else:
        connection.execute("BEGIN IMMEDIATE")
        for session in params:
            for group_params in session:
                connection.executemany(_ROWS_INSERT, group_params)
        connection.execute("COMMIT")
    wall = time.perf_counter() - start
    connection.close()
    return Run(wall, flushes, 0)


# -- peers ---------------------------------------------------------------------------------------


def _oai_items() -> list[list[Any]]:
    """The Responses-API items each checkpoint of a session adds (see ``openai_agents_peer``)."""
    from .peers.openai_agents_peer import turn_items

    groups: list[list[Any]] = []
    for turn in range(1, TURNS + 1):
        items = turn_items(turn)
        user, steps = items[:1], items[1:]
        for step in range(3):
            assistant, call, output = steps[3 * step : 3 * step + 3]
            groups += [user if step == 0 else [], [assistant, call], [output]]
    return groups


async def _openai_agents(path: Path, count: int) -> Run:
    from agents import SQLiteSession

    groups = _oai_items()
    sessions = [SQLiteSession(f"s{i}", path) for i in range(count)]

    async def checkpoint(index: int, group: int) -> None:
        await sessions[index].add_items(groups[group])

    try:
        return await _agents(count, checkpoint, catch=sqlite3.Error)
    finally:
        for session in sessions:
            session.close()


def _lg_messages() -> list[list[Any]]:
    """The LangChain messages each checkpoint of a session adds (see ``langgraph_peer``)."""
    from .peers.langgraph_peer import step_messages

    groups: list[list[Any]] = []
    for turn in range(1, TURNS + 1):
        for added in step_messages(turn):
            *before, ai, tool = added
            groups += [before, [ai], [tool]]
    return groups


def _lg_chains(count: int) -> list[Any]:
    from .peers.langgraph_peer import _Checkpoints

    chains = []
    for i in range(count):
        chain = _Checkpoints()
        chain.config = {"configurable": {"thread_id": f"s{i}", "checkpoint_ns": ""}}
        chains.append(chain)
    return chains


async def _langgraph_async(path: Path, count: int) -> Run:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    groups, chains = _lg_messages(), _lg_chains(count)
    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
        await saver.setup()

        async def checkpoint(index: int, group: int) -> None:
            chain = chains[index]
            chain.config = await saver.aput(*chain.next(groups[group]))

        return await _agents(count, checkpoint, catch=sqlite3.Error)


async def _langgraph_sync(path: Path, count: int) -> Run:
    from langgraph.checkpoint.sqlite import SqliteSaver

    groups, chains = _lg_messages(), _lg_chains(count)
    with SqliteSaver.from_conn_string(str(path)) as saver:
        saver.setup()

        def put(index: int, group: int) -> None:
            chain = chains[index]
            chain.config = saver.put(*chain.next(groups[group]))

        async def checkpoint(index: int, group: int) -> None:
            await anyio.to_thread.run_sync(put, index, group)

        return await _agents(count, checkpoint, catch=sqlite3.Error)


# -- PostgreSQL ----------------------------------------------------------------------------------


async def _postgres(count: int, grouped: list[list[Row]], mode: str) -> Run:
    import asyncpg

    from .postgres_bench import _RAW_INSERT, _RAW_TABLE, URL, _raw_records, _sql, _store_url

    schema = f"many_{os.getpid()}_{time.monotonic_ns()}"
    await _sql(f'CREATE SCHEMA "{schema}"')
    try:
        if mode == "eventlog":
            return await run_eventlog(_store_url(schema), count)
        await _sql(_RAW_TABLE.format(s=f'"{schema}"'))
        insert = _RAW_INSERT.format(s=f'"{schema}"')
        records = [[_raw_records(f"s{i}", rows) for rows in grouped] for i in range(count)]
        conn = await asyncpg.connect(URL)
        try:
            flushes: list[float] = []
            start = time.perf_counter()
            if mode == "per-flush":
                for group in range(len(grouped)):
                    for i in range(count):
                        began = time.perf_counter()
                        async with conn.transaction():
                            await conn.executemany(insert, records[i][group])
                        flushes.append(time.perf_counter() - began)
            else:
                async with conn.transaction():
                    await conn.executemany(insert, [r for s in records for g in s for r in g])
            return Run(time.perf_counter() - start, flushes, 0)
        finally:
            await conn.close()
    finally:
        await _sql(f'DROP SCHEMA "{schema}" CASCADE')


# -- the report ----------------------------------------------------------------------------------


def _sqlite_contenders(grouped: list[list[Row]]) -> dict[str, Callable[[Path, int], Run]]:
    def eventlog(path: Path, count: int) -> Run:
        return anyio.run(run_eventlog, f"sqlite:///{path}", count)

    contenders: dict[str, Callable[[Path, int], Run]] = {
        "eventlog SQLite": eventlog,
        "raw sqlite3, one transaction": lambda p, n: _raw_sqlite(p, n, grouped, mode="one"),
        "raw sqlite3, a transaction per checkpoint wave": lambda p, n: _raw_sqlite(
            p, n, grouped, mode="wave"
        ),
        "raw sqlite3, a transaction per flush": lambda p, n: _raw_sqlite(
            p, n, grouped, mode="per-flush"
        ),
    }
    try:
        import agents  # noqa: F401

        contenders["openai-agents SQLiteSession"] = lambda p, n: anyio.run(_openai_agents, p, n)
    except ImportError:
        print("(openai-agents is not installed: SQLiteSession not run)")
    try:
        import langgraph.checkpoint.sqlite  # noqa: F401

        contenders["langgraph AsyncSqliteSaver"] = lambda p, n: anyio.run(_langgraph_async, p, n)
        contenders["langgraph SqliteSaver"] = lambda p, n: anyio.run(_langgraph_sync, p, n)
    except ImportError:
        print("(langgraph-checkpoint-sqlite is not installed: its savers not run)")
    return contenders


def _print_runs(label: str, runs: list[Run], count: int) -> None:
    print_figure(
        Figure(
            f"{label}: events/s", Stats(tuple(count * EVENTS / r.wall for r in runs)), "events/s"
        )
    )
    print_figure(
        Figure(f"{label}: steps/s", Stats(tuple(count * STEPS / r.wall for r in runs)), "steps/s")
    )
    if runs[0].flushes:
        for name, q in (("p50", 0.50), ("p99", 0.99)):
            values = tuple(
                statistics.quantiles(r.flushes, n=100)[int(q * 100) - 1] * 1000 for r in runs
            )
            print_figure(Figure(f"{label}: flush {name}", Stats(values), "ms"))
    errors = sum(r.errors for r in runs)
    if errors or "eventlog" in label:
        print(
            f"{label}: failed flushes (StoreWriteError, database is locked): {errors}", flush=True
        )


def _ratios(results: dict[str, list[Run]], base: str) -> None:
    ours = results[base]
    for name, runs in results.items():
        if name == base:
            continue
        ratio = statistics.median(
            o.wall and r.wall / o.wall for o, r in zip(ours, runs, strict=True)
        )
        print(f"{base} / {name}: {ratio:.2f}x events/s", flush=True)


def _measure(contenders: dict[str, Callable[[int], Run]], runs: int) -> dict[str, list[Run]]:
    results: dict[str, list[Run]] = {name: [] for name in contenders}
    names = list(contenders)
    for index in range(runs):
        shift = index % len(names)
        for name in names[shift:] + names[:shift]:
            results[name].append(contenders[name](index))
    return results


def _sqlite_suite(count: int, runs: int, grouped: list[list[Row]]) -> None:
    contenders = _sqlite_contenders(grouped)
    if count > 256:  # the peers take minutes here; the store and the floor are what the goal needs
        contenders = {k: v for k, v in contenders.items() if k.startswith(("eventlog", "raw"))}

    def in_fresh_file(fn: Callable[[Path, int], Run]) -> Callable[[int], Run]:
        def run(_index: int) -> Run:
            with tempfile.TemporaryDirectory() as tmp:
                return fn(Path(tmp) / "many.db", count)

        return run

    results = _measure({k: in_fresh_file(v) for k, v in contenders.items()}, runs)
    print(f"\n### SQLite, N={count} ({runs} runs)", flush=True)
    for name, measured in results.items():
        _print_runs(f"N={count}, {name}", measured, count)
    _ratios(results, "eventlog SQLite")


def _postgres_suite(count: int, runs: int, grouped: list[list[Row]]) -> None:
    from .postgres_bench import _prepare_database

    try:
        anyio.run(_prepare_database)
    except (OSError, Exception) as exc:  # no server: say so, do not fail the other suites
        print(f"(PostgreSQL is not available: {exc})", flush=True)
        return
    modes = {
        "eventlog PostgreSQL": "eventlog",
        "raw asyncpg, one transaction": "one",
        "raw asyncpg, a transaction per flush": "per-flush",
    }

    def contender(mode: str) -> Callable[[int], Run]:
        return lambda _index: anyio.run(_postgres, count, grouped, mode)

    results = _measure({name: contender(mode) for name, mode in modes.items()}, runs)
    print(f"\n### PostgreSQL, N={count} ({runs} runs)", flush=True)
    for name, measured in results.items():
        _print_runs(f"N={count}, {name}", measured, count)
    _ratios(results, "eventlog PostgreSQL")


def main(*, quick: bool = False) -> None:
    print(
        f"(N sessions at once, {STEPS} steps each, {len(CHECKPOINTS)} flushes and {EVENTS} "
        "events per session; durable: fsync per commit)",
        flush=True,
    )
    grouped = anyio.run(_store_rows)
    sizes = QUICK if quick else FULL
    for count, runs in sizes:
        _sqlite_suite(count, runs, grouped)
    for count, runs in sizes:
        _postgres_suite(count, max(1, runs - 2) if count > 16 else runs, grouped)
