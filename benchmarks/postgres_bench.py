"""The PostgreSQL store against raw asyncpg, on the server of this machine.

Figures (each the median of several runs, store and raw alternating in the same run):

- durable throughput of the standard workload, one flush per turn (``power-loss``:
  ``synchronous_commit=on``), against raw asyncpg inserting the same encoded rows with one
  ``executemany`` in one transaction per turn; and their ratio (goal ≥0.8×);
- the same with ``durability="process-crash"`` (``synchronous_commit=off``);
- group commit: many sessions written by the background writer, no flush per turn;
- single-event flush latency p50/p99;
- open of an 18,000-event session against a raw select of its rows plus msgspec decode;
- four writer processes on four sessions: aggregate throughput, and the same with raw asyncpg;
- the first page of ``list`` with 100 sessions stored against 10,000 (issue 19).

The server is ``EVENTLOG_BENCH_POSTGRES_URL`` (default the local one, database
``eventlog_bench``, created when missing); each run works in its own schema, dropped at the end.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
import uuid
from functools import partial
from urllib.parse import urlsplit, urlunsplit

import anyio
import anyio.lowlevel
import asyncpg

from eventlog import EventTypes, open_store
from eventlog.stores import MemoryData, Row

from ._harness import Figure, Stats, print_figure
from ._pages import list_pages
from .workload import EVENTS_PER_TURN, TurnEvent, append_turn, turn_events

__all__ = ("main",)

URL = os.environ.get(
    "EVENTLOG_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/eventlog_bench"
)
_RAW_TABLE = """
CREATE TABLE IF NOT EXISTS {s}.raw_events (
    session_id text NOT NULL, seq bigint NOT NULL, type text NOT NULL, time bigint NOT NULL,
    surface text, sources text NOT NULL, ignorable boolean NOT NULL, data text NOT NULL,
    hash bytea NOT NULL, PRIMARY KEY (session_id, seq))
"""
_RAW_INSERT = (
    "INSERT INTO {s}.raw_events (session_id, seq, type, time, surface, sources, ignorable, "
    "data, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
)


def _store_url(schema: str) -> str:
    return f"{URL}?schema={schema}"


async def _prepare_database() -> None:
    parts = urlsplit(URL)
    database = parts.path.lstrip("/")
    conn = await asyncpg.connect(urlunsplit(parts._replace(path="/postgres")))
    try:
        if not await conn.fetchval(
            "SELECT count(*) > 0 FROM pg_database WHERE datname = $1", database
        ):
            await conn.execute(f'CREATE DATABASE "{database}"')
    finally:
        await conn.close()


async def _sql(statement: str) -> None:
    conn = await asyncpg.connect(URL)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


def _prepared(turns: int) -> list[list[TurnEvent]]:
    return [list(turn_events(turn)) for turn in range(1, turns + 1)]


async def _encoded_rows(turns: int) -> list[list[Row]]:
    """The rows the store writes for ``turns`` standard turns, grouped per turn."""
    data = MemoryData()
    async with open_store("memory:", data=data) as store:
        session = await store.create(session_id="raw")
        for turn in range(1, turns + 1):
            append_turn(session, turn)
        await session.flush()
    rows = data.rows["raw"]
    return [rows[i : i + EVENTS_PER_TURN] for i in range(0, len(rows), EVENTS_PER_TURN)]


def _raw_records(sid: str, rows: list[Row]) -> list[tuple[object, ...]]:
    """The parameters of :data:`_RAW_INSERT` for ``rows`` of session ``sid``."""
    return [
        (sid, r.seq, r.type, r.time, r.surface, r.sources, r.ignorable, r.data.decode(), r.hash)
        for r in rows
    ]


# -- one process ---------------------------------------------------------------------------------


async def paired_turns(
    schema: str, turns: list[list[TurnEvent]], rows: list[list[Row]], durability: str
) -> tuple[float, float]:
    """Events per second of the store and of raw asyncpg, one flush (transaction) per turn.

    The two alternate turn by turn in the same event loop, so the load of a shared machine
    falls on both alike. Raw asyncpg inserts the same encoded rows with one ``executemany``
    in one transaction per turn.
    """
    setting = "on" if durability == "power-loss" else "off"
    conn = await asyncpg.connect(URL, server_settings={"synchronous_commit": setting})
    insert = _RAW_INSERT.format(s=f'"{schema}"')
    sid = uuid.uuid4().hex
    store_time = raw_time = 0.0
    try:
        async with open_store(_store_url(schema), durability=durability) as store:
            session = await store.create()
            append = session.append
            for events, turn_rows in zip(turns, rows, strict=True):
                start = time.perf_counter()
                for type_, data, surface in events:
                    append(type_, data, surface=surface)
                await session.flush()
                store_time += time.perf_counter() - start
                start = time.perf_counter()
                records = _raw_records(sid, turn_rows)
                async with conn.transaction():
                    await conn.executemany(insert, records)
                raw_time += time.perf_counter() - start
    finally:
        await conn.close()
    events_count = len(turns) * EVENTS_PER_TURN
    return events_count / store_time, events_count / raw_time


async def group_commit(schema: str, sessions: int, turns: int) -> float:
    """Events per second when the background writer alone writes many sessions."""
    work = _prepared(turns)
    async with open_store(_store_url(schema)) as store:
        opened = [await store.create() for _ in range(sessions)]
        start = time.perf_counter()
        for events in work:
            for session in opened:
                for type_, data, surface in events:
                    session.append(type_, data, surface=surface)
            await anyio.lowlevel.checkpoint()  # let the writer run, as an app's I/O would
        for session in opened:
            await session.flush()
        elapsed = time.perf_counter() - start
    return sessions * turns * EVENTS_PER_TURN / elapsed


async def flush_latency(schema: str, count: int) -> tuple[list[float], list[float]]:
    """Seconds per single-event append-and-flush, and per raw single-row insert commit
    (autocommit, the same row), alternating."""
    from eventlog import APPEND, Message, UserMessage

    conn = await asyncpg.connect(URL)
    insert = _RAW_INSERT.format(s=f'"{schema}"')
    sid = uuid.uuid4().hex
    try:
        async with open_store(_store_url(schema)) as store:
            session = await store.create()
            times, raw = [], []
            for i in range(count):
                start = time.perf_counter()
                session.append(
                    "user/message", UserMessage(message=Message.user(f"m{i}")), surface=APPEND
                )
                await session.flush()
                times.append(time.perf_counter() - start)
                start = time.perf_counter()
                await conn.execute(insert, sid, i, "user/message", 0, None, "[]", False, "{}", b"")
                raw.append(time.perf_counter() - start)
    finally:
        await conn.close()
    return times, raw


def _percentiles(label: str, values: list[float]) -> None:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    print(
        f"{label:<58} p50 {statistics.median(values) * 1e3:.3f} ms, p99 {p99 * 1e3:.3f} ms "
        f"({len(values)} samples)",
        flush=True,
    )


async def open_times(schema: str, turns: int, runs: int) -> tuple[list[float], list[float]]:
    """Seconds to open (read, decode, verify, rebuild) a session of ``turns`` turns, and to
    select the same rows with raw asyncpg and decode each payload with msgspec; alternating."""
    types = EventTypes()
    async with open_store(_store_url(schema)) as store:
        session = await store.create()
        for turn in range(1, turns + 1):
            append_turn(session, turn)
        await session.aclose()
        conn = await asyncpg.connect(URL)
        select = f'SELECT seq, type, data FROM "{schema}".events WHERE session_id = $1 ORDER BY seq'
        store_times, raw_times = [], []
        try:
            for _ in range(runs):
                start = time.perf_counter()
                opened = await store.open(session.id)
                store_times.append(time.perf_counter() - start)
                assert opened.head == turns * EVENTS_PER_TURN - 1
                await opened.aclose()
                start = time.perf_counter()
                decoded = []
                for seq, type_, data in await conn.fetch(select, session.id):
                    info = types.get(type_)
                    assert info is not None
                    decoded.append((seq, info.decoder.decode(data.encode())))
                raw_times.append(time.perf_counter() - start)
                assert len(decoded) == turns * EVENTS_PER_TURN
        finally:
            await conn.close()
    return store_times, raw_times


# -- four processes ------------------------------------------------------------------------------


async def _child(schema: str, turns: int) -> None:
    """One writer process: set up, say ready, wait for go, write, print start and end."""
    work = _prepared(turns)
    async with open_store(_store_url(schema)) as store:
        session = await store.create()
        print("ready", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)
        start = time.time()
        for events in work:
            for type_, data, surface in events:
                session.append(type_, data, surface=surface)
            await session.flush()
        end = time.time()
    print(f"{start} {end}", flush=True)


async def _raw_child(schema: str, turns: int) -> None:
    """The same as :func:`_child` with raw asyncpg: one ``executemany`` transaction per turn."""
    rows = await _encoded_rows(turns)
    conn = await asyncpg.connect(URL)
    insert = _RAW_INSERT.format(s=f'"{schema}"')
    sid = uuid.uuid4().hex
    try:
        print("ready", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)
        start = time.time()
        for turn_rows in rows:
            records = _raw_records(sid, turn_rows)
            async with conn.transaction():
                await conn.executemany(insert, records)
        end = time.time()
    finally:
        await conn.close()
    print(f"{start} {end}", flush=True)


def processes(schema: str, count: int, turns: int, mode: str = "child") -> float:
    """Aggregate events per second of ``count`` writer processes, one session each
    (``mode``: ``child`` through the store, ``raw`` with raw asyncpg)."""
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "benchmarks.postgres_bench", mode, schema, str(turns)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    try:
        for child in children:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready"
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        spans = []
        for child in children:
            out, _ = child.communicate(timeout=600)
            start, end = map(float, out.split())
            spans.append((start, end))
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    wall = max(e for _, e in spans) - min(s for s, _ in spans)
    return count * turns * EVENTS_PER_TURN / wall


# -- report --------------------------------------------------------------------------------------


def _throughput(schema: str, turns: int, runs: int, durability: str) -> None:
    work = _prepared(turns)
    rows = anyio.run(_encoded_rows, turns)
    pairs = [anyio.run(paired_turns, schema, work, rows, durability) for _ in range(runs)]
    label = f"{durability}, flush per turn, {turns * EVENTS_PER_TURN:,} events"
    print_figure(Figure(f"store: {label}", Stats(tuple(s for s, _ in pairs)), "events/s"))
    print_figure(
        Figure(f"raw asyncpg executemany: {label}", Stats(tuple(r for _, r in pairs)), "events/s")
    )
    ratios = Stats(tuple(s / r for s, r in pairs))
    print_figure(Figure("  ratio store / raw (paired runs)", ratios, "×", "≥0.8"))


def _list(schema: str, runs: int) -> None:
    # Two schemas of their own (the stores create them), dropped with the run's.
    rows = anyio.run(_encoded_rows, 1)[0]
    urls = (_store_url(f"{schema}_list_small"), _store_url(f"{schema}_list_big"))
    try:
        anyio.run(partial(list_pages, urls, rows, runs, durability="process-crash"))
    finally:
        for url_schema in (f"{schema}_list_small", f"{schema}_list_big"):
            anyio.run(_sql, f'DROP SCHEMA IF EXISTS "{url_schema}" CASCADE')


def main(quick: bool = False) -> None:
    try:
        anyio.run(_prepare_database)
    except OSError as exc:
        print(f"(PostgreSQL not reachable at {URL}: {exc})", flush=True)
        return
    schema = f"bench_{os.getpid()}"
    anyio.run(_sql, f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    anyio.run(_sql, _RAW_TABLE.format(s=f'"{schema}"'))
    try:
        turns = 40 if quick else 200
        runs = 3 if quick else 7
        _throughput(schema, turns, runs, "power-loss")
        _throughput(schema, turns, runs, "process-crash")
        sessions, gturns = (20, 5) if quick else (50, 20)
        values = [anyio.run(group_commit, schema, sessions, gturns) for _ in range(runs)]
        print_figure(
            Figure(
                f"group commit, background writer, {sessions} sessions × {gturns} turns",
                Stats(tuple(values)),
                "events/s",
            )
        )
        latencies, raw_latencies = anyio.run(flush_latency, schema, 100 if quick else 500)
        _percentiles("single-event flush latency (power-loss)", latencies)
        _percentiles("  raw single-row insert commit latency", raw_latencies)
        oturns = 200 if quick else 1000
        store_open, raw_open = anyio.run(open_times, schema, oturns, runs)
        events = oturns * EVENTS_PER_TURN
        print_figure(Figure(f"open of a {events:,}-event session", Stats(tuple(store_open)), "s"))
        print_figure(
            Figure("  raw select of the same rows + msgspec decode", Stats(tuple(raw_open)), "s")
        )
        ratios = Stats(tuple(s / r for s, r in zip(store_open, raw_open, strict=True)))
        print_figure(Figure("  ratio open / raw (paired runs)", ratios, "×"))
        pturns = 25 if quick else 100
        prun = 3 if quick else 5
        pairs = [
            (processes(schema, 4, pturns), processes(schema, 4, pturns, "raw")) for _ in range(prun)
        ]
        label = f"4 writer processes, 4 sessions, flush per turn ({pturns} turns each)"
        print_figure(Figure(f"store: {label}", Stats(tuple(s for s, _ in pairs)), "events/s"))
        print_figure(Figure(f"raw asyncpg: {label}", Stats(tuple(r for _, r in pairs)), "events/s"))
        ratios = Stats(tuple(s / r for s, r in pairs))
        print_figure(Figure("  ratio store / raw (runs one after the other)", ratios, "×"))
        _list(schema, runs)
    finally:
        anyio.run(_sql, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        anyio.run(_child, sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1:2] == ["raw"]:
        anyio.run(_raw_child, sys.argv[2], int(sys.argv[3]))
    else:
        main(quick="--quick" in sys.argv)
