"""The store conformance suite against a real SQLite file."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eventlog import open_store
from eventlog.stores import LogStore
from eventlog.testing import StoreConformance, flip_a_letter


def flip_byte(path: Path, session_id: str, seq: int) -> None:
    """Side door: flip one letter of a stored event's text (still valid JSON)."""
    with sqlite3.connect(path) as db:
        (data,) = db.execute(
            "SELECT CAST(data AS BLOB) FROM events WHERE session_id = ? AND seq = ?",
            (session_id, seq),
        ).fetchone()
        flipped = flip_a_letter(data)
        db.execute(
            "UPDATE events SET data = CAST(? AS TEXT) WHERE session_id = ? AND seq = ?",
            (flipped, session_id, seq),
        )
    db.close()


class TestSQLiteConformance(StoreConformance):
    @pytest.fixture(autouse=True)
    def _location(self, tmp_path: Path) -> Iterator[None]:
        self.path = tmp_path / "sessions.db"
        yield
        # Every store a test opened was closed with all its connections and threads.
        assert [t.name for t in threading.enumerate() if t.name.startswith("eventlog-sqlite")] == []

    def make_store(self, **options: Any) -> LogStore:
        return open_store(f"sqlite:///{self.path}", **options)

    async def tamper_event(self, session_id: str, seq: int) -> None:
        flip_byte(self.path, session_id, seq)

    async def tamper_attachment(self, digest: str) -> None:
        with sqlite3.connect(self.path) as db:
            (data,) = db.execute(
                "SELECT data FROM attachments WHERE digest = ?", (digest,)
            ).fetchone()
            middle = len(data) // 2
            flipped = data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1 :]
            db.execute("UPDATE attachments SET data = ? WHERE digest = ?", (flipped, digest))
        db.close()


class TestSQLiteConformanceWritingOnTheThread(TestSQLiteConformance):
    """The same suite with every write round on the store's writer thread: by default the small
    rounds of these tests are written on the event loop's thread instead."""

    def make_store(self, **options: Any) -> LogStore:
        return open_store(f"sqlite:///{self.path}", inline_write_bytes=0, **options)
