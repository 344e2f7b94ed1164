"""The SQLite store against raw stdlib ``sqlite3`` on the same disk, measured in the same run.

Figures (issue 3, "Measure"): durable throughput flushing once per turn; group commit by the
background writer over many sessions; ``open`` of an 18,000-event session against a raw
``select`` plus ``msgspec`` decode; single-event flush latency against raw ``fsync``; ``open``
time and peak memory as a session grows to 160,000 events; the first page of ``list`` with 100
sessions stored against 10,000 (issue 19). Store runs and raw runs alternate so
drift on the shared machine hits both alike; every ratio is computed per pair of runs.
Payloads are built before the clock starts: the figures are the store's cost, not the app's.
"""

from __future__ import annotations

import gc
import os
import sqlite3
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import anyio.lowlevel

from eventlog import EventTypes, Session, open_store
from eventlog.stores import MemoryData, Row, chain_hash
from eventlog.stores.sqlite import SQLiteBackend
from eventlog.stores.sqlite._schema import reserve_wal

from ._harness import Figure, Stats, print_figure
from ._pages import list_pages
from .workload import EVENTS_PER_TURN, TurnEvent, turn_events

__all__ = ("main",)

_INSERT = (
    "INSERT INTO events (session_id, seq, type, time, surface, sources, ignorable, data, hash) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, CAST(? AS TEXT), ?)"
)
_Params = list[tuple[Any, ...]]


# -- workload ------------------------------------------------------------------------------------


def _turns(first: int, count: int) -> list[list[TurnEvent]]:
    return [list(turn_events(turn)) for turn in range(first, first + count)]


def _commit(session: Session, turn: list[TurnEvent]) -> None:
    append = session.append
    for type_, data, surface in turn:
        append(type_, data, surface=surface)


async def _encoded_rows(turns: int) -> list[Row]:
    """The stored rows of ``turns`` standard turns (encoded through a memory store)."""
    data = MemoryData()
    async with open_store("memory:", data=data, write_delay=60, max_pending_bytes=1 << 40) as s:
        session = await s.create(session_id="raw")
        for turn in _turns(1, turns):
            _commit(session, turn)
        await session.flush()
    return data.rows["raw"]


def _params(session_id: str, rows: list[Row]) -> _Params:
    return [
        (session_id, r.seq, r.type, r.time, r.surface, r.sources, r.ignorable, r.data, r.hash)
        for r in rows
    ]


async def _fresh_db(directory: Path, name: str) -> Path:
    """A new database file with the store's schema."""
    path = directory / name
    async with open_store(f"sqlite:///{path}"):
        pass
    return path


def _raw_connection(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = FULL")
    return db


# -- durable throughput, one flush per turn ------------------------------------------------------


class _PerTurn(NamedTuple):
    """One run's rate and per-turn medians (µs) of its parts; ``first`` is the warm-up turn's
    commit and flush (µs), not counted in the rate."""

    rate: float
    commit: float = 0.0
    flush: float = 0.0
    first: float = 0.0


#: The store with every write round on its writer thread (the default writes small rounds on
#: the event loop's thread): both are measured, so the price of the thread hop shows.
_THREAD_ONLY = {"inline_write_bytes": 0}


async def _store_per_turn(
    path: Path, turns: list[list[TurnEvent]], options: dict[str, Any] | None = None
) -> _PerTurn:
    async with open_store(f"sqlite:///{path}", **(options or {})) as store:
        session = await store.create()
        # The first turn warms up and is timed apart: its flush also waits for the store's
        # one-time WAL reservation (see `reserve_wal`), which a long-running app pays once.
        mark = time.perf_counter()
        _commit(session, turns[0])
        await session.flush()
        first = time.perf_counter() - mark
        commits, flushes = [], []
        start = time.perf_counter()
        for turn in turns[1:]:
            mark = time.perf_counter()
            _commit(session, turn)
            committed = time.perf_counter()
            await session.flush()
            commits.append(committed - mark)
            flushes.append(time.perf_counter() - committed)
        elapsed = time.perf_counter() - start
    rate = (len(turns) - 1) * EVENTS_PER_TURN / elapsed
    return _PerTurn(
        rate, statistics.median(commits) * 1e6, statistics.median(flushes) * 1e6, first * 1e6
    )


def _raw_per_turn(path: Path, batches: list[_Params]) -> _PerTurn:
    db = _raw_connection(path)

    def turn(params: _Params) -> None:
        db.execute("BEGIN IMMEDIATE")
        db.executemany(_INSERT, params)
        db.execute("COMMIT")

    try:
        # The same warm-up turn as the store's, timed apart (its commit creates the WAL).
        mark = time.perf_counter()
        turn(batches[0])
        first = time.perf_counter() - mark
        each = []
        start = time.perf_counter()
        for params in batches[1:]:
            mark = time.perf_counter()
            turn(params)
            each.append(time.perf_counter() - mark)
        elapsed = time.perf_counter() - start
    finally:
        db.close()
    rate = sum(map(len, batches[1:])) / elapsed
    return _PerTurn(rate, flush=statistics.median(each) * 1e6, first=first * 1e6)


async def _hop(path: Path, count: int = 500) -> float:
    """Median µs of one empty call to the store's writer thread (a round's fixed cost)."""
    async with open_store(f"sqlite:///{path}") as store:
        backend = store.backend
        assert isinstance(backend, SQLiteBackend)
        each = []
        for _ in range(count):
            mark = time.perf_counter()
            await backend._writer.call(_nothing)
            each.append(time.perf_counter() - mark)
    return statistics.median(each) * 1e6


def _nothing(_connection: object) -> None:
    return None


# -- group commit by the background writer -------------------------------------------------------


async def _store_group(
    path: Path, sessions: int, turns: list[list[TurnEvent]]
) -> tuple[float, float]:
    """(events/s until all is durable, share of that time spent committing)."""
    async with open_store(f"sqlite:///{path}", max_pending_bytes=1 << 40) as store:
        opened = [await store.create() for _ in range(sessions)]
        committing = 0.0
        start = time.perf_counter()
        for turn in turns:
            mark = time.perf_counter()
            for session in opened:
                _commit(session, turn)
            committing += time.perf_counter() - mark
            # The app yields between turns; the writer drains on its own.
            await anyio.lowlevel.checkpoint()
        for session in opened:
            await session.flush()
        elapsed = time.perf_counter() - start
    return sessions * len(turns) * EVENTS_PER_TURN / elapsed, committing / elapsed


def _raw_group(path: Path, params: _Params) -> float:
    db = _raw_connection(path)
    try:
        start = time.perf_counter()
        db.execute("BEGIN IMMEDIATE")
        db.executemany(_INSERT, params)
        db.execute("COMMIT")
        elapsed = time.perf_counter() - start
    finally:
        db.close()
    return len(params) / elapsed


# -- open (load) ---------------------------------------------------------------------------------


async def _build_session(path: Path, session_id: str, turns: int) -> None:
    async with open_store(f"sqlite:///{path}", write_delay=60, max_pending_bytes=1 << 40) as s:
        session = await s.create(session_id=session_id)
        for first in range(1, turns + 1, 500):
            for turn in _turns(first, min(500, turns + 1 - first)):
                _commit(session, turn)
            await session.flush()


async def _store_open(path: Path, session_id: str) -> float:
    async with open_store(f"sqlite:///{path}") as store:
        start = time.perf_counter()
        session = await store.open(session_id)
        elapsed = time.perf_counter() - start
        await session.aclose()
    return elapsed


def _raw_load(path: Path, session_id: str, *, verify: bool = False) -> float:
    """Seconds to select a session's rows and decode their payloads (and, with ``verify``,
    recompute the hash chain: the floor of what a verifying load costs)."""
    types = EventTypes()
    db = sqlite3.connect(path)
    try:
        start = time.perf_counter()
        found = db.execute(
            "SELECT seq, type, time, surface, sources, ignorable, CAST(data AS BLOB), hash "
            "FROM events WHERE session_id = ? ORDER BY seq",
            (session_id,),
        ).fetchall()
        decoded, prev = [], b""
        for seq, type_, stamp, surface, sources, ignorable, data, digest in found:
            info = types.get(type_)
            assert info is not None
            decoded.append(info.decoder.decode(data))
            if verify:
                prev = chain_hash(
                    prev, seq, type_, stamp, surface, sources, ignorable, data, session_id
                )
                assert prev == digest
        elapsed = time.perf_counter() - start
    finally:
        db.close()
    return elapsed


async def _open_memory(path: Path, session_id: str) -> tuple[float, float]:
    """(peak MiB of Python allocations during ``open``, stored MiB of the session)."""
    with sqlite3.connect(path) as db:
        (stored,) = db.execute(
            "SELECT SUM(LENGTH(CAST(data AS BLOB)) + LENGTH(hash) + LENGTH(type) + "
            "LENGTH(sources) + IFNULL(LENGTH(surface), 0) + 16) FROM events "
            "WHERE session_id = ?",
            (session_id,),
        ).fetchone()
    db.close()
    async with open_store(f"sqlite:///{path}") as store:
        gc.collect()
        tracemalloc.start()
        try:
            session = await store.open(session_id)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        await session.aclose()
    return peak / 2**20, stored / 2**20


# -- latency -------------------------------------------------------------------------------------


async def _store_latencies(
    path: Path, count: int, options: dict[str, Any] | None = None
) -> list[float]:
    turn = _turns(1, 1)[0]
    type_, data, surface = turn[1]  # a user message
    async with open_store(f"sqlite:///{path}", **(options or {})) as store:
        session = await store.create()
        latencies = []
        for _ in range(count):
            start = time.perf_counter()
            session.append(type_, data, surface=surface)
            await session.flush()
            latencies.append(time.perf_counter() - start)
    return latencies


def _raw_latencies(
    directory: Path, name: str, row: tuple[Any, ...], count: int, *, reserved: bool = False
) -> list[float]:
    """Raw sqlite3: one single-row transaction per call (the floor of a one-event flush). With
    ``reserved``, on a WAL file grown in advance as the store keeps its own (``reserve_wal``),
    so commits overwrite blocks: the floor of the store's flush on the same footing."""
    path = anyio.run(_fresh_db, directory, name)
    db = _raw_connection(path)
    if reserved:
        reserve_wal(db, str(path))
    try:
        latencies = []
        for seq in range(count):
            start = time.perf_counter()
            db.execute("BEGIN IMMEDIATE")
            db.execute(_INSERT, (row[0], seq, *row[2:]))
            db.execute("COMMIT")
            latencies.append(time.perf_counter() - start)
    finally:
        db.close()
    return latencies


def _fsync_latencies(directory: Path, count: int, *, grow: bool) -> list[float]:
    """``write`` of 4 KiB then ``fsync``, ``count`` times: appending to a new file (each fsync
    also commits the file's new size and blocks, like a commit to a growing WAL) or, without
    ``grow``, overwriting blocks written and synced before the clock starts (like a commit to
    the reused WAL the store keeps: see ``reserve_wal``)."""
    block = os.urandom(4096)
    path = directory / ("fsync-grow.bin" if grow else "fsync-overwrite.bin")
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        if not grow:
            for _ in range(count):
                os.write(fd, block)
            os.fsync(fd)
            os.lseek(fd, 0, os.SEEK_SET)
        latencies = []
        for _ in range(count):
            start = time.perf_counter()
            os.write(fd, block)
            os.fsync(fd)
            latencies.append(time.perf_counter() - start)
    finally:
        os.close(fd)
    return latencies


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- the suite -----------------------------------------------------------------------------------


def _ratio_figure(name: str, ours: list[float], raw: list[float], unit: str, target: str) -> None:
    print_figure(Figure(f"{name}: store", Stats(tuple(ours)), unit))
    print_figure(Figure(f"{name}: raw sqlite3", Stats(tuple(raw)), unit))
    ratios = tuple(o / r for o, r in zip(ours, raw, strict=True))
    print_figure(Figure(f"{name}: store / raw", Stats(ratios), "×", target))


def _per_turn(directory: Path, runs: int, turns: int) -> None:
    rows = anyio.run(_encoded_rows, turns)
    batches = [
        _params("raw", rows[i : i + EVENTS_PER_TURN]) for i in range(0, len(rows), EVENTS_PER_TURN)
    ]
    ours, threaded, raw, hops = [], [], [], []
    for run in range(runs):
        ours.append(anyio.run(_store_per_turn, directory / f"pt-store-{run}.db", _turns(1, turns)))
        path = anyio.run(_fresh_db, directory, f"pt-raw-{run}.db")
        raw.append(_raw_per_turn(path, batches))
        threaded.append(
            anyio.run(
                _store_per_turn, directory / f"pt-thread-{run}.db", _turns(1, turns), _THREAD_ONLY
            )
        )
        hops.append(anyio.run(_hop, directory / f"hop-{run}.db"))
    _ratio_figure(
        f"durable throughput, power-loss, flush per turn ({turns - 1} turns after a warm-up one)",
        [o.rate for o in ours],
        [r.rate for r in raw],
        "events/s",
        "≥0.8×",
    )
    print_figure(
        Figure(
            "  same, every round on the writer thread / raw",
            Stats(tuple(t.rate / r.rate for t, r in zip(threaded, raw, strict=True))),
            "×",
        )
    )
    # Where a turn's time goes (per-turn medians of each run). The store's own cost per turn is
    # what it adds to the raw transaction: it does not shrink when the disk gets slower, so
    # the ratio above is lower on a fast disk than on a slow one.
    parts = (
        ("  per turn: commit 18 events (Session.append)", [o.commit for o in ours]),
        ("  per turn: store flush (round + transaction)", [o.flush for o in ours]),
        ("  per turn: raw transaction (BEGIN, executemany, COMMIT)", [r.flush for r in raw]),
        (
            "  per turn: store (commit + flush) minus raw transaction",
            [o.commit + o.flush - r.flush for o, r in zip(ours, raw, strict=True)],
        ),
        ("  per turn: flush with every round on the writer thread", [t.flush for t in threaded]),
        ("  one empty hop to the writer thread and back", hops),
        (
            "  warm-up turn, not counted above: store (WAL reservation included)",
            [o.first for o in ours],
        ),
        ("  warm-up turn, not counted above: raw (creates the WAL)", [r.first for r in raw]),
    )
    for name, values in parts:
        print_figure(Figure(name, Stats(tuple(values)), "µs"))


def _group(directory: Path, runs: int, sessions: int, turns: int) -> None:
    rows = anyio.run(_encoded_rows, turns)
    params = [p for i in range(sessions) for p in _params(f"raw{i}", rows)]
    ours, raw, shares = [], [], []
    for run in range(runs):
        path = directory / f"g-store-{run}.db"
        rate, share = anyio.run(_store_group, path, sessions, _turns(1, turns))
        ours.append(rate)
        shares.append(share)
        path = anyio.run(_fresh_db, directory, f"g-raw-{run}.db")
        raw.append(_raw_group(path, params))
    _ratio_figure(
        f"group commit, background writer, {sessions} sessions × {turns} turns",
        ours,
        raw,
        "events/s",
        "≥0.7×",
    )
    print_figure(Figure("  share of store time spent in Session.append", Stats(tuple(shares)), ""))


def _open(directory: Path, runs: int, turns: int) -> None:
    path = directory / "open.db"
    anyio.run(_build_session, path, "big", turns)
    ours, raw, floor = [], [], []
    for _ in range(runs):
        ours.append(anyio.run(_store_open, path, "big") * 1000)
        raw.append(_raw_load(path, "big") * 1000)
        floor.append(_raw_load(path, "big", verify=True) * 1000)
    _ratio_figure(f"open of a {turns * EVENTS_PER_TURN:,}-event session", ours, raw, "ms", "≤1.5×")
    print_figure(Figure("  raw select + decode + hash-chain check", Stats(tuple(floor)), "ms"))


def _latency(directory: Path, runs: int, count: int) -> None:
    (row,) = _params("raw", anyio.run(_encoded_rows, 1)[1:2])  # a user message
    p50, p99, t50, f50, f99, g50, s50, w50, ratio = [], [], [], [], [], [], [], [], []
    for run in range(runs):
        ours = anyio.run(_store_latencies, directory / f"lat-{run}.db", count)
        threaded = anyio.run(
            _store_latencies, directory / f"lat-thread-{run}.db", count, _THREAD_ONLY
        )
        fsync = _fsync_latencies(directory, count, grow=False)
        growing = _fsync_latencies(directory, count, grow=True)
        raw = _raw_latencies(directory, f"lat-raw-{run}.db", row, count)
        p50.append(_percentile(ours, 0.5) * 1e6)
        p99.append(_percentile(ours, 0.99) * 1e6)
        t50.append(_percentile(threaded, 0.5) * 1e6)
        f50.append(_percentile(fsync, 0.5) * 1e6)
        f99.append(_percentile(fsync, 0.99) * 1e6)
        g50.append(_percentile(growing, 0.5) * 1e6)
        s50.append(_percentile(raw, 0.5) * 1e6)
        reserved = _raw_latencies(directory, f"lat-rsv-{run}.db", row, count, reserved=True)
        w50.append(_percentile(reserved, 0.5) * 1e6)
        ratio.append(p50[-1] / f50[-1])
    figures = (
        (f"single-event flush latency p50 ({count} flushes)", p50, "µs", ""),
        ("single-event flush latency p99", p99, "µs", ""),
        ("  same p50, every round on the writer thread", t50, "µs", ""),
        ("raw fsync (4 KiB overwrite) latency p50", f50, "µs", ""),
        ("raw fsync (4 KiB overwrite) latency p99", f99, "µs", ""),
        ("raw fsync (4 KiB append, file grows) latency p50", g50, "µs", ""),
        ("raw sqlite3 single-row transaction p50 (new WAL)", s50, "µs", ""),
        ("raw sqlite3 single-row transaction p50 (WAL reserved like the store's)", w50, "µs", ""),
        ("flush p50 / fsync (overwrite) p50", ratio, "×", "≤2×"),
    )
    for name, values, unit, target in figures:
        print_figure(Figure(name, Stats(tuple(values)), unit, target))


def _growth(directory: Path, runs: int, sizes: list[int]) -> None:
    for turns in sizes:
        path = directory / f"grow-{turns}.db"
        anyio.run(_build_session, path, "big", turns)
        events = turns * EVENTS_PER_TURN
        times = [anyio.run(_store_open, path, "big") * 1000 for _ in range(runs)]
        print_figure(Figure(f"open time, {events:,} events", Stats(tuple(times)), "ms"))
        peak, stored = anyio.run(_open_memory, path, "big")
        print(
            f"{'  peak Python memory of that open / stored bytes':<58} "
            f"{peak:>10,.1f} MiB / {stored:,.1f} MiB = {peak / stored:.2f}×   [≤3×]",
            flush=True,
        )
        path.unlink()


def _list(directory: Path, runs: int) -> None:
    # One turn's rows per session, without fsync while filling: the figure is the read.
    rows = anyio.run(_encoded_rows, 1)
    urls = (f"sqlite:///{directory / 'list-small.db'}", f"sqlite:///{directory / 'list-big.db'}")
    anyio.run(partial(list_pages, urls, rows, runs, durability="process-crash"))


def _with_directory(measure: Callable[[Path], None]) -> None:
    with tempfile.TemporaryDirectory(prefix="eventlog-bench-") as name:
        measure(Path(name))


def main(quick: bool = False) -> None:
    runs = 3 if quick else 7
    _with_directory(lambda d: _per_turn(d, runs, 60 if quick else 300))
    _with_directory(lambda d: _group(d, runs, 10 if quick else 20, 20 if quick else 30))
    _with_directory(lambda d: _open(d, runs, 200 if quick else 1000))
    _with_directory(lambda d: _latency(d, 3 if quick else 5, 100 if quick else 300))
    sizes = [100, 1000] if quick else [1000, 3000, 8889]
    _with_directory(lambda d: _growth(d, 1 if quick else 3, sizes))
    _with_directory(lambda d: _list(d, runs))
    print(f"  (median of {runs} alternating runs; spread is min–max)", flush=True)
