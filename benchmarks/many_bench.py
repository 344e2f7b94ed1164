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

Two times are reported per checkpoint: the **checkpoint** (the agent's appends and its
flush: what the agent waits for before its next step; for raw and the peers, the one
transaction or call that makes the checkpoint durable) and, for eventlog, the **flush alone**
(``await session.flush()``, call to return). For the lockstep runs the suite also prints
Little's law: in a closed system with no think time the mean checkpoint cycle is N divided by
the throughput, so a p99 under 20 ms at N sessions needs at least N / 20 ms flushes/s.

A second workload, **agents with model and tool latency** (``think``), runs the same 6 steps
and 18 flushes per session, but each agent waits for the model after its checkpoint before the
model request (``MODEL_LATENCY``, uniform 100–300 ms) and for the tool after ``tool/call``'s
checkpoint (``TOOL_LATENCY``, uniform 10–50 ms), seeded; the agents start staggered over one
model latency (uniform 0–300 ms), so they are not in step. Reported at N = 256, 1,024 and
4,096 on SQLite and PostgreSQL (eventlog; openai-agents ``SQLiteSession`` at 256 for
comparison, not with ``--quick``; ``--quick`` runs N = 256 on SQLite only): events/s, the
offered load (the flushes/s the agents would ask for if every checkpoint took no time)
against the flushes/s they reached, flush p50/p99/max, checkpoint p50/p99, the process's CPU
time over the wall time, failed flushes, and beside them the disk's floor (raw commits of one
checkpoint's rows, alone).

Each figure is the median of several runs with the min–max spread; runs rotate the order of
the contenders. Results on this machine are in ``benchmarks/MANY.md``.
"""

from __future__ import annotations

import itertools
import os
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
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

__all__ = (
    "CHECKPOINTS",
    "MODEL_LATENCY",
    "TOOL_LATENCY",
    "Plan",
    "main",
    "run_eventlog",
    "think_plan",
)

TURNS = 2  # 6 steps
FULL = ((16, 5), (256, 3), (1024, 1))
QUICK = ((16, 2), (256, 1))
#: The agents with model and tool latency: (N, runs). 4,096 is past what one core can serve
#: at these latencies (see ``benchmarks/MANY.md``): it shows the store saturated, not failing.
THINK_FULL = ((256, 5), (1024, 5), (4096, 3))
THINK_QUICK = ((256, 1),)
#: Seconds an agent waits for the model's reply (uniform). The fast end of what agents see: a
#: short reply (a tool call, a few dozen tokens) from a fast hosted or local model; slower
#: models only lower the load, so this is the demanding end of realistic.
MODEL_LATENCY = (0.100, 0.300)
#: Seconds a tool runs (uniform): a local one (read a file, grep, a small query).
TOOL_LATENCY = (0.010, 0.050)
THINK_SEED = 19
#: The disk's floor beside the agents with think time: this many sessions' 18 checkpoints,
#: each its own commit, one after another (270 commits: enough for a p99).
_FLOOR_SESSIONS = 15
#: The issue's goal: p99 flush latency under this many seconds at 1,024 sessions.
P99_GOAL = 0.020
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
    """One run of N sessions.

    :ivar wall: seconds from all agents starting to the last one done.
    :ivar checkpoints: each checkpoint's seconds (the appends and the flush, or the one call).
    :ivar errors: failed checkpoints.
    :ivar flushes: each ``await session.flush()``'s seconds alone (eventlog only).
    :ivar durations: each agent's seconds from its start to its last checkpoint (think time
        included).
    :ivar cpu: the process's CPU seconds (every thread) over the run.
    """

    wall: float
    checkpoints: list[float]
    errors: int
    flushes: Sequence[float] = ()
    durations: Sequence[float] = ()
    cpu: float = 0.0


class Plan(NamedTuple):
    """The think time of N agents: when each starts (seconds after the first could) and how
    long it waits after each of its checkpoints (0 where it goes straight on)."""

    starts: list[float]
    waits: list[list[float]]

    def offered(self) -> float:
        """Flushes/s the agents would ask for if every checkpoint took no time."""
        return sum(len(waits) / sum(waits) for waits in self.waits)


def think_plan(count: int, seed: int = THINK_SEED) -> Plan:
    """The seeded think time of ``count`` agents: a model latency after the checkpoint before
    the model request (``step/start``'s), a tool latency after ``tool/call``'s; each agent
    starts at a uniform offset within one model latency's span."""
    rng = random.Random(seed)
    starts, waits = [], []
    for _ in range(count):
        starts.append(rng.uniform(0.0, MODEL_LATENCY[1]))
        agent = []
        for group in CHECKPOINTS:
            last = group[-1][0]
            if last == "step/start":
                agent.append(rng.uniform(*MODEL_LATENCY))
            elif last == "tool/call":
                agent.append(rng.uniform(*TOOL_LATENCY))
            else:
                agent.append(0.0)
        waits.append(agent)
    return Plan(starts, waits)


async def _agents(
    count: int,
    checkpoint: Callable[[int, int], Awaitable[None]],
    *,
    catch: type[BaseException],
    plan: Plan | None = None,
) -> Run:
    """Run ``count`` agents at once; agent ``i`` calls ``checkpoint(i, group)`` per group, in
    lockstep (``plan=None``: each goes on the moment its checkpoint returns) or with the
    plan's start offsets and waits."""
    go = anyio.Event()
    checkpoints: list[float] = []
    durations: list[float] = []
    errors = 0

    async def agent(index: int) -> None:
        nonlocal errors
        await go.wait()
        waits = None
        if plan is not None:
            await anyio.sleep(plan.starts[index])
            waits = plan.waits[index]
        began = time.perf_counter()
        for group in range(len(CHECKPOINTS)):
            start = time.perf_counter()
            try:
                await checkpoint(index, group)
            except catch:
                errors += 1
            checkpoints.append(time.perf_counter() - start)
            if waits is not None and waits[group]:
                await anyio.sleep(waits[group])
        durations.append(time.perf_counter() - began)

    async with anyio.create_task_group() as tg:
        for index in range(count):
            tg.start_soon(agent, index)
        await anyio.lowlevel.checkpoint()
        cpu = time.process_time()
        start = time.perf_counter()
        go.set()
    wall = time.perf_counter() - start
    return Run(wall, checkpoints, errors, durations=durations, cpu=time.process_time() - cpu)


async def run_eventlog(url: str, count: int, plan: Plan | None = None, **options: Any) -> Run:
    """``count`` eventlog sessions on the store at ``url``: append each group, then flush (in
    lockstep, or with ``plan``'s think time)."""
    async with open_store(url, **options) as store:
        sessions = [await store.create(session_id=f"s{i}") for i in range(count)]
        flushes: list[float] = []

        async def checkpoint(index: int, group: int) -> None:
            session = sessions[index]
            for type_, data, surface in CHECKPOINTS[group]:
                session.append(type_, data, surface=surface)
            start = time.perf_counter()
            try:
                await session.flush()
            finally:
                flushes.append(time.perf_counter() - start)

        run = await _agents(count, checkpoint, catch=EventLogError, plan=plan)
        return run._replace(flushes=flushes)


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
    next is written, what group commit does at best), ``"half-wave"`` (two per checkpoint, of
    half the sessions each: the commits of a pipeline of two alternating rounds, the
    fastest such a pipeline can be on this disk) or ``"per-flush"`` (one per session and
    checkpoint)."""
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    connection.execute(_ROWS_TABLE)
    # Parameters built before the clock starts: only the inserts and commits are timed.
    params = [[_params(f"s{i}", rows) for rows in grouped] for i in range(count)]
    checkpoints: list[float] = []
    start = time.perf_counter()
    if mode == "per-flush":
        for group in range(len(grouped)):
            for i in range(count):
                began = time.perf_counter()
                connection.execute("BEGIN IMMEDIATE")
                connection.executemany(_ROWS_INSERT, params[i][group])
                connection.execute("COMMIT")
                checkpoints.append(time.perf_counter() - began)
    elif mode in ("wave", "half-wave"):
        # "half-wave": each wave in two transactions of half the sessions, the commits of the
        # store's pipeline of two alternating rounds (without any of its Python).
        cuts = [0, count] if mode == "wave" else [0, count // 2, count]
        for group in range(len(grouped)):
            for low, high in itertools.pairwise(cuts):
                connection.execute("BEGIN IMMEDIATE")
                for i in range(low, high):
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
    return Run(wall, checkpoints, 0)


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


async def _openai_agents(path: Path, count: int, plan: Plan | None = None) -> Run:
    from agents import SQLiteSession

    groups = _oai_items()
    sessions = [SQLiteSession(f"s{i}", path) for i in range(count)]

    async def checkpoint(index: int, group: int) -> None:
        await sessions[index].add_items(groups[group])

    try:
        return await _agents(count, checkpoint, catch=sqlite3.Error, plan=plan)
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


async def _postgres(
    count: int, grouped: list[list[Row]], mode: str, plan: Plan | None = None
) -> Run:
    import asyncpg

    from .postgres_bench import _RAW_INSERT, _RAW_TABLE, URL, _raw_records, _sql, _store_url

    schema = f"many_{os.getpid()}_{time.monotonic_ns()}"
    await _sql(f'CREATE SCHEMA "{schema}"')
    try:
        if mode == "eventlog":
            return await run_eventlog(_store_url(schema), count, plan)
        await _sql(_RAW_TABLE.format(s=f'"{schema}"'))
        insert = _RAW_INSERT.format(s=f'"{schema}"')
        records = [[_raw_records(f"s{i}", rows) for rows in grouped] for i in range(count)]
        conn = await asyncpg.connect(URL)
        try:
            checkpoints: list[float] = []
            start = time.perf_counter()
            if mode == "per-flush":
                for group in range(len(grouped)):
                    for i in range(count):
                        began = time.perf_counter()
                        async with conn.transaction():
                            await conn.executemany(insert, records[i][group])
                        checkpoints.append(time.perf_counter() - began)
            else:
                async with conn.transaction():
                    await conn.executemany(insert, [r for s in records for g in s for r in g])
            return Run(time.perf_counter() - start, checkpoints, 0)
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
        "raw sqlite3, two transactions per checkpoint wave": lambda p, n: _raw_sqlite(
            p, n, grouped, mode="half-wave"
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


def _quantile(values: Sequence[float], q: float) -> float:
    """The ``q``-quantile of ``values`` (``q`` in hundredths: 0.50, 0.99)."""
    return statistics.quantiles(values, n=100)[round(q * 100) - 1]


def _print_ms(label: str, runs: list[Run], times: Callable[[Run], Sequence[float]]) -> None:
    """p50 and p99 (and the max where ``label`` asks for it) of ``times(run)``, in ms."""
    for name, q in (("p50", 0.50), ("p99", 0.99)):
        values = tuple(_quantile(times(r), q) * 1000 for r in runs)
        print_figure(Figure(f"{label} {name}", Stats(values), "ms"))


def _print_errors(label: str, runs: list[Run]) -> None:
    errors = sum(r.errors for r in runs)
    if errors or "eventlog" in label:
        print(
            f"{label}: failed flushes (StoreWriteError, database is locked): {errors}", flush=True
        )


def _print_runs(label: str, runs: list[Run], count: int) -> None:
    print_figure(
        Figure(
            f"{label}: events/s", Stats(tuple(count * EVENTS / r.wall for r in runs)), "events/s"
        )
    )
    print_figure(
        Figure(f"{label}: steps/s", Stats(tuple(count * STEPS / r.wall for r in runs)), "steps/s")
    )
    if runs[0].checkpoints:
        _print_ms(f"{label}: checkpoint", runs, lambda r: r.checkpoints)
    if runs[0].flushes:
        _print_ms(f"{label}: flush() alone", runs, lambda r: r.flushes)
    _print_errors(label, runs)


def _print_little(label: str, runs: list[Run], count: int, floor: float | None = None) -> None:
    """Little's law for a lockstep run (a closed system with no think time): the mean
    checkpoint cycle is N / throughput, so a p99 under ``P99_GOAL`` (which bounds the mean)
    needs at least N / ``P99_GOAL`` checkpoints a second. ``floor``: the raw one-transaction
    events/s of the same sitting, to compare the need with."""
    flushes = len(CHECKPOINTS)
    law = Stats(tuple(count / (count * flushes / r.wall) * 1000 for r in runs))
    mean = Stats(tuple(statistics.fmean(r.checkpoints) * 1000 for r in runs))
    print_figure(Figure(f"{label}: Little's law, N / throughput", law, "ms"))
    print_figure(Figure(f"{label}: measured mean checkpoint", mean, "ms"))
    need = count / P99_GOAL
    events = need * EVENTS / flushes
    measured = statistics.median(count * flushes / r.wall for r in runs)
    against = f"; {events / floor:.2f}x raw sqlite3 in one transaction" if floor else ""
    print(
        f"{label}: a p99 under {P99_GOAL * 1000:.0f} ms needs a mean cycle under it: "
        f">= {need:,.0f} flushes/s = {events:,.0f} events/s (measured {measured:,.0f} "
        f"flushes/s{against})",
        flush=True,
    )


def _print_think(label: str, runs: list[Run], count: int, plan: Plan) -> None:
    """The figures of the agents with model and tool latency (of the floor beside them: its
    commits' latency only)."""
    if "raw" in label:
        _print_ms(f"{label}: commit", runs, lambda r: r.checkpoints)
        values = tuple(max(r.checkpoints) * 1000 for r in runs)
        print_figure(Figure(f"{label}: commit max", Stats(values), "ms"))
        return
    print_figure(
        Figure(
            f"{label}: events/s", Stats(tuple(count * EVENTS / r.wall for r in runs)), "events/s"
        )
    )
    print(f"{label}: offered load {plan.offered():,.0f} flushes/s", flush=True)
    # Each agent's rate over its own run, summed: what the agents reached, think time included.
    reached = tuple(sum(len(CHECKPOINTS) / d for d in r.durations) for r in runs)
    print_figure(Figure(f"{label}: flushes/s reached", Stats(reached), "flushes/s"))
    if runs[0].flushes:
        _print_ms(f"{label}: flush() alone", runs, lambda r: r.flushes)
        values = tuple(max(r.flushes) * 1000 for r in runs)
        print_figure(Figure(f"{label}: flush() alone max", Stats(values), "ms"))
    _print_ms(f"{label}: checkpoint", runs, lambda r: r.checkpoints)
    values = tuple(max(r.checkpoints) * 1000 for r in runs)
    print_figure(Figure(f"{label}: checkpoint max", Stats(values), "ms"))
    cpu = tuple(r.cpu / r.wall * 100 for r in runs)
    print_figure(Figure(f"{label}: CPU time / wall time", Stats(cpu), "%"))
    _print_errors(label, runs)


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
    floor = statistics.median(
        count * EVENTS / r.wall for r in results["raw sqlite3, one transaction"]
    )
    _print_little(f"N={count}, eventlog SQLite", results["eventlog SQLite"], count, floor)


def _postgres_suite(count: int, runs: int, grouped: list[list[Row]]) -> None:
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
    _print_little(f"N={count}, eventlog PostgreSQL", results["eventlog PostgreSQL"], count)


def _postgres_available() -> bool:
    from .postgres_bench import _prepare_database

    try:
        anyio.run(_prepare_database)
    except (OSError, Exception) as exc:  # no server: say so, do not fail the other suites
        print(f"(PostgreSQL is not available: {exc})", flush=True)
        return False
    return True


def _think_suite(
    count: int, runs: int, grouped: list[list[Row]], *, postgres: bool, peers: bool = True
) -> None:
    """The agents with model and tool latency: eventlog on SQLite or PostgreSQL (and, with
    ``peers``, openai-agents ``SQLiteSession`` beside SQLite at N <= 256, for comparison).

    Beside them, in the same rotation: the disk's floor, raw commits of one checkpoint's rows
    one after another and alone (``_FLOOR_SESSIONS`` sessions' checkpoints). No flush can be
    faster than a commit, and on a shared machine the commit's own p99 moves with the other
    processes' I/O."""
    plan = think_plan(count)
    contenders: dict[str, Callable[[int], Run]] = {}
    if postgres:
        contenders["eventlog PostgreSQL"] = lambda _index: anyio.run(
            _postgres, count, [], "eventlog", plan
        )
        contenders["raw asyncpg, a commit per checkpoint, alone"] = lambda _index: anyio.run(
            _postgres, _FLOOR_SESSIONS, grouped, "per-flush"
        )
    else:

        def in_fresh_file(fn: Callable[[Path], Awaitable[Run]]) -> Callable[[int], Run]:
            def run(_index: int) -> Run:
                with tempfile.TemporaryDirectory() as tmp:
                    return anyio.run(fn, Path(tmp) / "many.db")

            return run

        contenders["eventlog SQLite"] = in_fresh_file(
            lambda path: run_eventlog(f"sqlite:///{path}", count, plan)
        )

        async def floor(path: Path) -> Run:
            return _raw_sqlite(path, _FLOOR_SESSIONS, grouped, mode="per-flush")

        contenders["raw sqlite3, a commit per checkpoint, alone"] = in_fresh_file(floor)
        if peers and count <= 256:
            try:
                import agents  # noqa: F401
            except ImportError:
                print("(openai-agents is not installed: SQLiteSession not run)")
            else:
                contenders["openai-agents SQLiteSession"] = in_fresh_file(
                    lambda path: _openai_agents(path, count, plan)
                )
    results = _measure(contenders, runs)
    store = "PostgreSQL" if postgres else "SQLite"
    print(f"\n### Agents with model and tool latency, {store}, N={count} ({runs} runs)", flush=True)
    for name, measured in results.items():
        _print_think(f"N={count}, {name}, think", measured, count, plan)


def main(*, quick: bool = False) -> None:
    print(
        f"(N sessions at once, {STEPS} steps each, {len(CHECKPOINTS)} flushes and {EVENTS} "
        "events per session; durable: fsync per commit)",
        flush=True,
    )
    print(
        "(checkpoint: the agent's appends and its flush, or the one call or transaction that "
        "makes it durable; flush() alone: `await session.flush()`, call to return)",
        flush=True,
    )
    grouped = anyio.run(_store_rows)
    sizes = QUICK if quick else FULL
    for count, runs in sizes:
        _sqlite_suite(count, runs, grouped)
    postgres = _postgres_available()
    if postgres:
        for count, runs in sizes:
            _postgres_suite(count, max(1, runs - 2) if count > 16 else runs, grouped)
    print(
        f"\n(agents with model and tool latency: the same checkpoints; after the one before the "
        f"model request a model latency of {MODEL_LATENCY[0] * 1000:.0f}-"
        f"{MODEL_LATENCY[1] * 1000:.0f} ms, after tool/call's a tool latency of "
        f"{TOOL_LATENCY[0] * 1000:.0f}-{TOOL_LATENCY[1] * 1000:.0f} ms, uniform, seed "
        f"{THINK_SEED}; starts staggered over 0-{MODEL_LATENCY[1] * 1000:.0f} ms)",
        flush=True,
    )
    for count, runs in THINK_QUICK if quick else THINK_FULL:
        # --quick leaves the peer out: it takes ten seconds a run here, saturated.
        _think_suite(count, runs, grouped, postgres=False, peers=not quick)
    if postgres and not quick:
        for count, runs in THINK_FULL:
            _think_suite(count, runs, grouped, postgres=True)
