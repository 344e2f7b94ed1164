"""``python -m benchmarks peers``: eventlog side by side with the stores users pick instead.

Every peer writes sessions of the standard workload (``benchmarks.workload``: 18 events, about
7 KiB per turn) into a fresh SQLite file on the same disk, durably at the end of every turn, and
reloads the session through its own load path. For each session length T the peers run in
alternating order (the order rotates from run to run, so none always runs on a cold or a warm
machine), each run on a new database. Reported per peer and T: workload events per second
(T × 18 / write seconds; median and min–max), the ratio to raw sqlite3, the reload time of the
session, and database bytes per turn. Then, because group commit only shows when sessions
share a file, 8 sessions of 125 turns are written at once (one task or thread each) and the
total throughput is reported the same way. One table is printed; the same figures go to
``benchmarks/results/peers.json``, ``peers.md`` and the chart ``peers.png`` (``peers-quick.*``
for ``--quick``).

The peers, one module each (their docstrings say what the equivalent of the workload is, how it
is made durable and what its load path validates):

- ``raw_sqlite`` — the floor: stdlib sqlite3, one ``executemany`` per turn;
- ``eventlog_peer`` — eventlog, flush per turn and the background writer;
- ``eventsourcing_peer`` — eventsourcing's SQLite application, one aggregate per session;
- ``openai_agents_peer`` — OpenAI Agents SDK ``SQLiteSession``, ``add_items`` per turn;
- ``langgraph_peer`` — LangGraph ``SqliteSaver`` / ``AsyncSqliteSaver``, a checkpoint per step;
- ``langgraph_graph_peer`` — a compiled LangGraph agent graph, messages in a ``DeltaChannel``.

A peer whose package is not installed, or that fails, is reported as such in the table.
"""

from __future__ import annotations

import gc
import importlib
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._common import EVENTS_PER_TURN, Concurrent, Peer, Seedable, database_bytes
from ._report import Meta, Outcome, PeerInfo, load_average, report

__all__ = ("main",)

#: (module, class, name shown when the module cannot be imported).
PEERS: tuple[tuple[str, str, str], ...] = (
    ("raw_sqlite", "RawSQLite", "raw sqlite3"),
    ("eventlog_peer", "EventlogFlushPerTurn", "eventlog (flush per turn)"),
    ("eventlog_peer", "EventlogBackground", "eventlog (background writer)"),
    ("eventsourcing_peer", "EventSourcing", "eventsourcing"),
    ("openai_agents_peer", "OpenAIAgents", "openai-agents SQLiteSession"),
    ("langgraph_peer", "LangGraphSync", "langgraph SqliteSaver"),
    ("langgraph_peer", "LangGraphAsync", "langgraph AsyncSqliteSaver"),
    ("langgraph_graph_peer", "LangGraphDeltaGraph", "langgraph graph + DeltaChannel"),
)

#: Session lengths and runs per length.
FULL = ((100, 5), (1_000, 5), (3_000, 3))
QUICK = ((30, 2), (100, 2))
#: Sessions written at once into one file, turns each, runs.
CONCURRENT_FULL = (8, 125, 3)
CONCURRENT_QUICK = (4, 20, 2)
WARM_UP_TURNS = 5


@dataclass
class _Loaded:
    info: PeerInfo
    peer: Peer | None


@dataclass
class _Cell:
    """The runs of one peer at one session length."""

    write_seconds: list[float] = field(default_factory=list)
    write_cpu_seconds: list[float] = field(default_factory=list)
    reload_seconds: list[float] = field(default_factory=list)
    reload_cpu_seconds: list[float] = field(default_factory=list)
    db_bytes: list[int] = field(default_factory=list)
    settings: dict[str, str] = field(default_factory=dict)
    error: str = ""
    note: str = ""


def main(quick: bool = False) -> None:
    """Run every peer at every session length, print the table, write JSON, Markdown, PNG."""
    lengths = QUICK if quick else FULL
    loaded = [_load(module, cls, name) for module, cls, name in PEERS]
    cells: dict[tuple[str, int], _Cell] = {}
    started, load_at_start = time.perf_counter(), load_average()
    with tempfile.TemporaryDirectory(prefix="eventlog-peers-") as scratch:
        root = Path(scratch)
        _warm_up(loaded, root)
        for turns, runs in lengths:
            print(f"T = {turns:,} turns, {runs} alternating runs …", flush=True)
            for run in range(runs):
                for entry in _rotated(loaded, run):
                    if entry.peer is not None:
                        cell = cells.setdefault((entry.info.name, turns), _Cell())
                        _measure(entry.peer, root, turns, cell, run)
        sessions, per_session, runs = CONCURRENT_QUICK if quick else CONCURRENT_FULL
        print(f"{sessions} concurrent sessions × {per_session:,} turns, {runs} runs …", flush=True)
        for run in range(runs):
            for entry in _rotated(loaded, run):
                if entry.peer is not None:
                    cell = cells.setdefault((entry.info.name, -1), _Cell())
                    _measure_concurrent(entry.peer, root, sessions, per_session, cell, run)
    meta = Meta.now(
        quick=quick,
        lengths=list(lengths),
        seconds=time.perf_counter() - started,
        scratch=tempfile.gettempdir(),
        load_at_start=load_at_start,
    )
    outcomes = [
        _outcome(entry.info, turns, cells.get((entry.info.name, turns)))
        for turns, _runs in lengths
        for entry in loaded
    ]
    outcomes += [
        _outcome(entry.info, per_session, cells.get((entry.info.name, -1)), sessions=sessions)
        for entry in loaded
    ]
    report(meta, [entry.info for entry in loaded], outcomes)


def _load(module: str, cls: str, name: str) -> _Loaded:
    try:
        peer: Peer = getattr(importlib.import_module(f"{__name__}.{module}"), cls)()
    except ImportError as exc:
        return _Loaded(PeerInfo.missing(name, f"not installed: {exc}"), None)
    return _Loaded(PeerInfo.of(peer), peer)


def _rotated(loaded: list[_Loaded], run: int) -> list[_Loaded]:
    """The peers in the order of run ``run``: rotated by one each run, so none always goes first."""
    shift = run % len(loaded)
    return loaded[shift:] + loaded[:shift]


def _warm_up(loaded: list[_Loaded], root: Path) -> None:
    """One short untimed session per peer: imports, caches and the first file creation."""
    for entry in loaded:
        if entry.peer is not None:
            _measure(entry.peer, root, WARM_UP_TURNS, _Cell(), run=-1)


def _measure(peer: Peer, root: Path, turns: int, cell: _Cell, run: int) -> None:
    """One run of ``peer`` at ``turns`` turns, added to ``cell`` (or the error recorded)."""
    if cell.error or cell.note.startswith("not run"):
        return
    runs_cap = getattr(peer, "max_runs", lambda turns: None)(turns)
    if runs_cap is not None and run >= runs_cap:
        cell.note = f"{runs_cap} runs (time budget)"
        return
    path = root / f"{type(peer).__name__}-{turns}-{run}.db"
    limit = peer.max_turns()
    with _recording(cell, root):
        if limit is not None and turns > limit:
            # Writing is out of reach; the load path reads only the final state, so seed it.
            if not isinstance(peer, Seedable):
                cell.note = f"not run above {limit:,} turns (time budget)"
                return
            session_id = peer.seed(path, turns)
            cell.note = f"write not run above {limit:,} turns (storage grows as T²)"
        else:
            gc.collect()
            result = peer.write(path, turns)
            cell.write_seconds.append(result.timing.wall)
            cell.write_cpu_seconds.append(result.timing.cpu)
            cell.db_bytes.append(database_bytes(path))
            cell.settings = result.settings
            session_id = result.session_id
        gc.collect()
        timing = peer.reload(path, session_id)
        cell.reload_seconds.append(timing.wall)
        cell.reload_cpu_seconds.append(timing.cpu)


def _measure_concurrent(
    peer: Peer, root: Path, sessions: int, turns: int, cell: _Cell, run: int
) -> None:
    """One run of ``sessions`` sessions of ``turns`` turns written at once into one file."""
    if cell.error or cell.note:
        return
    if not isinstance(peer, Concurrent):
        cell.note = getattr(peer, "concurrent_note", "not run")
        return
    path = root / f"{type(peer).__name__}-concurrent-{run}.db"
    with _recording(cell, root):
        gc.collect()
        timing = peer.write_concurrent(path, sessions, turns)
        cell.write_seconds.append(timing.wall)
        cell.write_cpu_seconds.append(timing.cpu)
        cell.db_bytes.append(database_bytes(path))


@contextmanager
def _recording(cell: _Cell, root: Path) -> Iterator[None]:
    """One run: a failure is recorded in ``cell`` (reported, not dropped); ``root`` is emptied."""
    try:
        yield
    except Exception as exc:
        cell.error = f"failed: {type(exc).__name__}: {exc}"[:300]
    finally:
        for leftover in root.iterdir():
            leftover.unlink()


def _outcome(info: PeerInfo, turns: int, cell: _Cell | None, *, sessions: int = 1) -> Outcome:
    if cell is None:
        return Outcome(info.name, turns, sessions=sessions, error=info.error or "not run")
    total = sessions * turns
    events_per_s = [total * EVENTS_PER_TURN / s for s in cell.write_seconds]
    bytes_per_turn = [b / total for b in cell.db_bytes]
    cpu_per_turn = [s / total for s in cell.write_cpu_seconds]
    settings: dict[str, Any] = dict(cell.settings)
    note = cell.note
    comparable = settings.get("journal_mode") == "wal" and settings.get("synchronous") in ("2", "3")
    if settings and not comparable:
        note = f"NOT durable like the others: {settings}; {note}".rstrip("; ")
    elif cell.write_seconds and not settings and sessions == 1:
        note = f"durability settings not read back; {note}".rstrip("; ")
    return Outcome(
        info.name,
        turns,
        sessions=sessions,
        events_per_s=events_per_s,
        write_cpu_per_turn_s=cpu_per_turn,
        reload_s=cell.reload_seconds,
        reload_cpu_s=cell.reload_cpu_seconds,
        bytes_per_turn=bytes_per_turn,
        settings=settings,
        error=cell.error,
        note=note,
    )
