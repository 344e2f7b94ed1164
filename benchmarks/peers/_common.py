"""What every peer of the side-by-side benchmark provides, and the helpers they share.

A peer writes one session of ``turns`` standard turns (``benchmarks.workload``) into a fresh
SQLite file, durably at the end of every turn unless it says otherwise, and reloads that session
from a second connection. The harness (``benchmarks.peers``) times nothing itself: the peer
returns the seconds of its write loop (the turns and the last durability barrier, not opening
the database or creating its schema) and of its load call (not opening the database).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple, Protocol, runtime_checkable

import msgspec

from benchmarks.workload import EVENTS_PER_TURN, turn_events

__all__ = (
    "DURABILITY_PRAGMAS",
    "Concurrent",
    "EVENTS_PER_TURN",
    "NativeEvent",
    "Peer",
    "Seedable",
    "Stopwatch",
    "Timing",
    "WriteResult",
    "database_bytes",
    "durability_settings",
    "native_turn",
    "write_in_threads",
)


@dataclass(frozen=True)
class WriteResult:
    """One timed write of a whole session.

    :param timing: wall and CPU time of the write loop, including the last durability barrier.
    :param session_id: what :meth:`Peer.reload` needs to find the session again.
    :param settings: the durability settings read back from the peer's own connection
        (``{"journal_mode": "wal", "synchronous": "2"}``), so the report shows what ran.
    """

    timing: Timing
    session_id: str
    settings: dict[str, str]


class Timing(NamedTuple):
    """Wall seconds and process CPU seconds (every thread of this process) of one load."""

    wall: float
    cpu: float


class Stopwatch:
    """Times a block by the wall clock and by this process's CPU time.

    CPU time counts the peer's worker threads too and is blind to other processes, so on a
    shared machine it shows the work a load does when the wall clock also shows waiting.
    """

    def __enter__(self) -> Stopwatch:
        self._wall = time.perf_counter()
        self._cpu = time.process_time()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.timing = Timing(time.perf_counter() - self._wall, time.process_time() - self._cpu)


class Peer(Protocol):
    """A session store measured side by side with eventlog."""

    #: Short name printed in the table.
    name: str
    #: The distribution whose version is reported (``"eventlog"``, ``"eventsourcing"``, …).
    package: str
    #: How this peer is made durable at the end of each turn, in one sentence.
    durability: str
    #: What the load path checks about what it reads (``"nothing"`` when it checks nothing).
    validates: str
    #: True when the load path checks what it reads (the reload comparison uses only these).
    validating: bool

    def write(self, path: Path, turns: int) -> WriteResult:
        """Write one session of ``turns`` turns into the fresh database ``path`` and close it."""
        ...

    def reload(self, path: Path, session_id: str) -> Timing:
        """Time to load the whole session back through the peer's own load path."""
        ...

    def max_turns(self) -> int | None:
        """The longest session this peer can write within the time budget, or None for any."""
        ...


@runtime_checkable
class Concurrent(Protocol):
    """A peer that can write several sessions into one file at the same time."""

    def write_concurrent(self, path: Path, sessions: int, turns: int) -> Timing:
        """Write ``sessions`` sessions of ``turns`` turns at once, each durable every turn."""
        ...


@runtime_checkable
class Seedable(Protocol):
    """A peer that cannot write long sessions in time but can lay down what its load reads."""

    def seed(self, path: Path, turns: int) -> str:
        """Write, untimed, the state a ``turns``-turn session leaves; return the session id."""
        ...


def write_in_threads(sessions: int, work: Callable[[int, threading.Barrier], None]) -> Timing:
    """Run ``work(index, start)`` in one thread per session, timed from all of them starting.

    Each ``work`` does its untimed setup, then ``start.wait()``; the clock starts when every
    thread has reached the barrier and stops when the last one returns.
    """
    start = threading.Barrier(sessions + 1, timeout=120)
    with ThreadPoolExecutor(sessions) as pool:
        futures = [pool.submit(work, index, start) for index in range(sessions)]
        with Stopwatch() as watch:
            start.wait()
            for future in futures:
                future.result()
    return watch.timing


#: (type, payload as JSON-compatible builtins) of one workload event.
NativeEvent = tuple[str, dict[str, Any]]


def native_turn(turn: int) -> Iterator[NativeEvent]:
    """The events of ``turn`` as plain dicts, for peers that store JSON-like payloads."""
    for type_, data, _surface in turn_events(turn):
        yield type_, msgspec.to_builtins(data)


def database_bytes(path: Path) -> int:
    """Bytes the database occupies on disk: the main file and any write-ahead log left over."""
    total = 0
    for candidate in (path, path.with_name(path.name + "-wal")):
        if candidate.exists():
            total += candidate.stat().st_size
    return total


#: The pragmas that decide durability, read back from each peer's connection and reported.
DURABILITY_PRAGMAS = ("journal_mode", "synchronous")


def durability_settings(connection: sqlite3.Connection) -> dict[str, str]:
    """:data:`DURABILITY_PRAGMAS` on ``connection``, as text (``{"synchronous": "2", …}``)."""
    settings = {}
    for name in DURABILITY_PRAGMAS:
        row = connection.execute(f"PRAGMA {name}").fetchone()
        settings[name] = str(row[0]) if row is not None else "?"
    return settings
