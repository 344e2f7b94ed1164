"""``open`` against history length (``python -m benchmarks open``): benchmarks/OPEN.md.

Sessions of 10,000, 100,000 and 1,000,000 events of the standard workload (18-event turns with
a tool call per step), compacted every 2,000 events (the whole surface replaced by a summary),
built through the public API on one SQLite file (and, with ``--quick`` off, on PostgreSQL),
snapshotted as the store does by default (after each compaction and every 4,000 events).
Figures per size, medians of several opens, each in a new store:

- ``open`` (from the latest snapshot): time, and peak memory as the peak of Python allocations
  traced by ``tracemalloc`` during the open (a separate run: tracing slows it);
- ``open(verify="full")``: time (the whole-chain replay, what ``open`` cost before snapshots);
- raw ``select`` of every row plus ``msgspec`` decode of its payload, for context;
- the lease write alone (one durable transaction, part of every open);
- appending and flushing 20,016 events with snapshots off and on (what they cost writers);
- live session memory: one session open for writing while it appends 100,000 and 1,000,000
  events of the same workload (never reopened): Python allocations traced by ``tracemalloc``
  (peak, and current after a ``gc`` at the end) with ``trim_every=0`` (every event kept in
  memory, as before trimming) and with the default (the events each snapshot covers dropped
  once 10,000 have gathered), and untraced seconds to append them at 100,000; then, trimmed,
  with ``projections`` imported and read as an agent server reads them (the timeline, the
  messages, the inbox and the request header at each step), in a child process of its own so
  their registered snapshot states do not change the other figures.

The files are built once per run under a temporary directory; a session is reopened every
100,000 events while it is built, so building holds at most that many events in memory.
"""

from __future__ import annotations

import gc
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import tracemalloc
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from eventlog import EventTypes, Message, Replace, UserMessage, open_store
from eventlog.stores import DEFAULT_TRIM_EVERY

from ._harness import Figure, Stats, print_figure
from .workload import EVENTS_PER_TURN, append_turn, turn_events

__all__ = ("main",)

COMPACT_EVERY = 2000
SIZES = (10_000, 100_000, 1_000_000)
_REOPEN_EVERY = 100_000


async def build(
    url: str,
    session_id: str,
    events: int,
    *,
    reopen_every: int | None = _REOPEN_EVERY,
    trace: bool = False,
    agent: bool = False,
    **options: Any,
) -> int:
    """Append about ``events`` events of standard turns to a new session, compacting every
    ``COMPACT_EVERY`` events, closing and reopening it every ``reopen_every`` events (``None``:
    one session open throughout); return its head. With ``trace``, print the session's
    traced memory (``tracemalloc`` must be tracing) after a ``gc`` at the end. With
    ``agent``, read the projections at each step as an agent does (imports them)."""
    read = _agent_reads() if agent else None
    async with open_store(url, write_delay=60, max_pending_bytes=1 << 40, **options) as store:
        session = await store.create(session_id=session_id)
        turn, since_compaction, since_open = 0, 0, 0
        while session.head + 1 < events:
            turn += 1
            if read is None:
                append_turn(session, turn)
            else:
                for type_, data, surface in turn_events(turn):
                    session.append(type_, data, surface=surface)
                    if type_ == "step/start":
                        read(session)
            since_compaction += EVENTS_PER_TURN
            since_open += EVENTS_PER_TURN
            if since_compaction >= COMPACT_EVERY:
                nodes = list(session.surface_index.nodes)
                summary = UserMessage(message=Message.user(f"Summary of turns up to {turn}."))
                session.append(
                    "user/message", summary, surface=Replace(nodes[0], nodes[-1]), sources=nodes
                )
                since_compaction = 0
                await session.flush()  # a compaction is flushed (and snapshotted) at once
            elif turn % 50 == 0:
                await session.flush()
            if reopen_every is not None and since_open >= reopen_every:
                await session.aclose()
                session = await store.open(session_id)
                since_open = 0
        await session.flush()
        head = session.head
        if trace:
            gc.collect()
            current, peak = tracemalloc.get_traced_memory()
            held = head + 1 - session.loaded_from + len(session.pinned)
            _LIVE.append((current / 2**20, peak / 2**20, held))
        await session.aclose()
    return head


#: (current MiB, peak MiB, events held) of each traced live build, appended by ``build``.
_LIVE: list[tuple[float, float, int]] = []


def _agent_reads() -> Any:
    """What an agent reads at each step: the open step's calls and the numbering (the
    timeline), the history for the request (messages), the inbox to claim from and the
    request settings in force. Imported here, as the agent's process would: the other
    figures read no projection (the store's snapshots carry the projections' states either
    way, resolved from its default ``snapshot_states``)."""
    from projections import inbox, messages, request_header, timeline

    def read(session: Any) -> None:
        _ = timeline(session).open_calls
        messages(session)
        inbox(session)
        request_header(session)

    return read


def agent_live_memory(url: str, events: int) -> None:
    """Print the traced memory of one live trimming session read as an agent reads it (the
    child process of :func:`_agent_memory`): current MiB after gc, peak MiB, events held."""
    gc.collect()
    tracemalloc.start()
    anyio.run(partial(build, reopen_every=None, trace=True, agent=True), url, "agent", events)
    tracemalloc.stop()
    print(*_LIVE.pop(), flush=True)


def _agent_memory(url: str, events: int) -> tuple[float, float, int]:
    """:func:`agent_live_memory`'s figures, measured in a child process (this checkout's code)."""
    code = f"from benchmarks.open_bench import agent_live_memory as m; m({url!r}, {events})"
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env
    ).stdout.split()
    return float(out[0]), float(out[1]), int(out[2])


def _live_memory(url: str, events: int, trim_every: int) -> tuple[float, float, int]:
    """Traced (current MiB after a gc at the end, peak MiB, events held in memory) of one
    session open throughout while it appends ``events`` events with ``trim_every``."""
    gc.collect()
    tracemalloc.start()
    try:
        anyio.run(
            partial(build, reopen_every=None, trace=True, trim_every=trim_every),
            url,
            f"live-{events}-{trim_every}",
            events,
        )
    finally:
        tracemalloc.stop()
    return _LIVE.pop()


def _live_seconds(url: str, events: int, trim_every: int, run: int) -> float:
    start = time.perf_counter()
    anyio.run(
        partial(build, reopen_every=None, trim_every=trim_every),
        url,
        f"t-{events}-{trim_every}-{run}",
        events,
    )
    return time.perf_counter() - start


def _live_suite(directory: Path, sizes: tuple[int, ...]) -> None:
    """The "live session memory" figures (benchmarks/OPEN.md)."""
    url = f"sqlite:///{directory / 'live.db'}"
    modes = (("kept (trim_every=0)", 0), ("trimmed (default)", DEFAULT_TRIM_EVERY))
    for size in sizes:
        for label, every in modes:
            current, peak, held = _live_memory(url, size, every)
            print(
                f"SQLite live session, {size:,} events, {label}: {current:.1f} MiB after gc, "
                f"peak {peak:.1f} MiB, {held:,} events held",
                flush=True,
            )
    for size in sizes:
        current, peak, held = _agent_memory(f"sqlite:///{directory / f'agent-{size}.db'}", size)
        print(
            f"SQLite live session, {size:,} events, trimmed, projections read at each step: "
            f"{current:.1f} MiB after gc, peak {peak:.1f} MiB, {held:,} events held",
            flush=True,
        )
    # Seconds, untraced, A/B alternating (what trimming costs the writer, if anything).
    seconds: dict[int, list[float]] = {0: [], DEFAULT_TRIM_EVERY: []}
    for run in range(3):
        for _, every in modes:
            seconds[every].append(_live_seconds(url, 100_000, every, run))
    for label, every in modes:
        print_figure(
            Figure(
                f"SQLite live session: append 100,000 events, {label}",
                Stats(tuple(seconds[every])),
                "s",
            )
        )


async def _open_once(url: str, session_id: str, verify: str, trace: bool) -> tuple[float, float]:
    """(seconds, peak MiB traced or 0) of one ``open`` in a new store."""
    async with open_store(url) as store:
        gc.collect()
        if trace:
            tracemalloc.start()
        start = time.perf_counter()
        session = await store.open(session_id, verify=verify)
        elapsed = time.perf_counter() - start
        peak = 0.0
        if trace:
            peak = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
        assert verify == "full" or session.snapshot_seq is not None, session.snapshot_fault
        await session.aclose()
    return elapsed, peak


async def _delete(url: str, session_id: str) -> None:
    async with open_store(url) as store:
        await store.delete(session_id)


async def _lease_write(url: str, session_id: str) -> float:
    """Seconds of taking and releasing the writer lease: part of every ``open``, one small
    durable transaction each (so it costs what the disk's sync costs)."""
    async with open_store(url) as store:
        start = time.perf_counter()
        owner = "bench:lease"
        await store.backend.acquire_lease(session_id, owner)
        elapsed = time.perf_counter() - start
        await store.backend.release_lease(session_id, owner)
    return elapsed


async def _write_cost(url: str, session_id: str, every: int) -> float:
    """Seconds to append and flush 20,016 events (one flush per turn, a compaction every
    2,000 events) with ``snapshot_every=every``: what snapshots add to the commit path."""
    start = time.perf_counter()
    await build(url, session_id, 20_000, snapshot_every=every)
    return time.perf_counter() - start


def _raw_select_decode(path: Path, session_id: str) -> float:
    types = EventTypes()
    db = sqlite3.connect(path)
    try:
        start = time.perf_counter()
        cursor = db.execute(
            "SELECT type, CAST(data AS BLOB) FROM events WHERE session_id = ? ORDER BY seq",
            (session_id,),
        )
        while rows := cursor.fetchmany(1000):
            for type_, data in rows:
                info = types.get(type_)
                assert info is not None
                info.decoder.decode(data)
        return time.perf_counter() - start
    finally:
        db.close()


def _measure(
    label: str, url: str, sid: str, size: int, runs: int, path: Path | None
) -> dict[str, float]:
    opens = [anyio.run(_open_once, url, sid, "snapshot", False)[0] * 1000 for _ in range(runs)]
    leases = [anyio.run(_lease_write, url, sid) * 1000 for _ in range(runs)]
    peaks = [anyio.run(_open_once, url, sid, "snapshot", True)[1] for _ in range(min(3, runs))]
    # A full replay of 1,000,000 events takes about a minute and gigabytes: once is enough.
    full_runs = runs if size <= 100_000 else 1
    fulls = [anyio.run(_open_once, url, sid, "full", False)[0] * 1000 for _ in range(full_runs)]
    print_figure(Figure(f"{label}: open (from snapshot)", Stats(tuple(opens)), "ms"))
    print_figure(Figure(f"{label}:   of which the lease write", Stats(tuple(leases)), "ms"))
    print_figure(Figure(f"{label}:   peak traced memory of that open", Stats(tuple(peaks)), "MiB"))
    print_figure(Figure(f"{label}: open(verify='full')", Stats(tuple(fulls)), "ms"))
    if path is not None:
        raws = [_raw_select_decode(path, sid) * 1000 for _ in range(full_runs)]
        print_figure(Figure(f"{label}: raw select + decode of every row", Stats(tuple(raws)), "ms"))
    return {"open": Stats(tuple(opens)).median, "peak": Stats(tuple(peaks)).median}


def _suite(kind: str, url: str, path: Path | None, sizes: tuple[int, ...], runs: int) -> None:
    medians: dict[int, dict[str, float]] = {}
    for size in sizes:
        sid = f"s{size}"
        start = time.perf_counter()
        head = anyio.run(build, url, sid, size)
        built = time.perf_counter() - start
        print(f"# {kind}: built {head + 1:,} events in {built:.0f} s", flush=True)
        medians[size] = _measure(f"{kind} {size:,} events", url, sid, size, runs, path)
        anyio.run(_delete, url, sid)  # a PostgreSQL schema outlives the run
    small, large = min(sizes), max(sizes)
    if small != large:
        ratio = medians[large]["open"] / medians[small]["open"]
        print(
            f"{kind}: open {large:,} / {small:,} events = {ratio:.2f}×   [≤1.5×]; at {large:,}: "
            f"{medians[large]['open']:.1f} ms [<50 ms], {medians[large]['peak']:.1f} MiB "
            "[<20 MiB]",
            flush=True,
        )


def main(*, quick: bool = False) -> None:
    sizes = SIZES[:2] if quick else SIZES
    runs = 3 if quick else 7
    with tempfile.TemporaryDirectory(prefix="eventlog-open-") as name:
        path = Path(name) / "open.db"
        _suite("SQLite", f"sqlite:///{path}", path, sizes, runs)
        for every in (0, 1000, 4000):
            url = f"sqlite:///{Path(name) / f'write-{every}.db'}"
            costs = [anyio.run(_write_cost, url, f"w{run}", every) for run in range(3)]
            print_figure(
                Figure(
                    f"SQLite: append + flush per turn, 20,016 events, snapshot_every={every}",
                    Stats(tuple(costs)),
                    "s",
                )
            )
        _live_suite(Path(name), SIZES[1:2] if quick else SIZES[1:])
        pg = os.environ.get("EVENTLOG_BENCH_PG")
        if pg:
            _suite("PostgreSQL", pg, None, sizes, runs)
        else:
            print("(PostgreSQL: set EVENTLOG_BENCH_PG to a store URL to run it)", flush=True)
