"""The floor: stdlib ``sqlite3`` with one ``executemany`` per turn.

Equivalent of the workload: the 18 events of a turn become 18 rows
``(session_id, seq, type, time, data)`` with the payload Struct encoded to JSON by msgspec, inserted
with one ``executemany`` inside ``BEGIN IMMEDIATE … COMMIT``. No validation, no hash, no
surface index: the least work any store could do to keep the same rows.

Durability: WAL with ``synchronous=FULL`` set explicitly on the connection, so every turn's
``COMMIT`` fsyncs the write-ahead log before it returns (survives power loss).

Concurrent sessions: one thread and one connection per session on the same file; a process
lock serializes the transactions (waiting on SQLite's own write lock instead would add its
busy-handler sleeps), each its own fsync.

Load path: one ``SELECT`` ordered by seq and a JSON decode of each row. It validates nothing.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import msgspec

from benchmarks.workload import turn_events

from ._common import Stopwatch, Timing, WriteResult, durability_settings, write_in_threads

__all__ = ("RawSQLite",)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    time INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (session_id, seq)
)
"""
_INSERT = "INSERT INTO events (session_id, seq, type, time, data) VALUES (?, ?, ?, ?, ?)"
_SESSION = "raw-session"
_NO_LOCK = nullcontext()


def _connect(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(path, isolation_level=None, timeout=60.0)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    return connection


def _write_turns(
    connection: sqlite3.Connection,
    session_id: str,
    turns: int,
    lock: AbstractContextManager[Any] = _NO_LOCK,
) -> None:
    encode = msgspec.json.encode
    seq = 0
    for turn in range(1, turns + 1):
        now = time.time_ns() // 1_000_000
        rows = []
        for type_, data, _surface in turn_events(turn):
            rows.append((session_id, seq, type_, now, encode(data)))
            seq += 1
        with lock:
            connection.execute("BEGIN IMMEDIATE")
            connection.executemany(_INSERT, rows)
            connection.execute("COMMIT")


class RawSQLite:
    """Stdlib sqlite3, one transaction and one ``executemany`` per turn."""

    name = "raw sqlite3"
    package = "sqlite3"
    durability = "WAL, synchronous=FULL, one COMMIT per turn"
    validates = "nothing (json decode only)"
    validating = False

    def write(self, path: Path, turns: int) -> WriteResult:
        connection = _connect(path)
        try:
            connection.execute(_SCHEMA)
            with Stopwatch() as watch:
                _write_turns(connection, _SESSION, turns)
            settings = durability_settings(connection)
        finally:
            connection.close()
        return WriteResult(watch.timing, _SESSION, settings)

    def write_concurrent(self, path: Path, sessions: int, turns: int) -> Timing:
        """One thread and one connection per session, all writing the same file at once."""
        setup = _connect(path)
        setup.execute(_SCHEMA)
        setup.close()
        lock = threading.Lock()

        def work(index: int, start: threading.Barrier) -> None:
            connection = _connect(path)  # sqlite3 connections stay in their own thread
            try:
                start.wait()
                _write_turns(connection, f"{_SESSION}-{index}", turns, lock)
            finally:
                connection.close()

        return write_in_threads(sessions, work)

    def reload(self, path: Path, session_id: str) -> Timing:
        connection = _connect(path)
        try:
            decode = msgspec.json.decode
            with Stopwatch() as watch:
                rows = connection.execute(
                    "SELECT seq, type, data FROM events WHERE session_id = ? ORDER BY seq",
                    (session_id,),
                ).fetchall()
                events = [(seq, type_, decode(data)) for seq, type_, data in rows]
        finally:
            connection.close()
        assert events, "the session must not be empty"
        return watch.timing

    def max_turns(self) -> int | None:
        return None
