"""The conformance suite against the memory store (the reference store)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from eventlog import open_store
from eventlog.stores import LogStore, MemoryData, Row
from eventlog.testing import StoreConformance, flip_a_letter


class TestMemoryStore(StoreConformance):
    @pytest.fixture(autouse=True)
    def _data(self) -> None:
        self.data = MemoryData()

    def make_store(self, **options: Any) -> LogStore:
        # Stores share the data, leases included, like two stores on one file in one process.
        return open_store("memory:", data=self.data, **options)

    async def tamper_event(self, session_id: str, seq: int) -> None:
        rows = self.data.rows[session_id]
        row = rows[seq]
        rows[seq] = msgspec.structs.replace(row, data=flip_a_letter(row.data))
        assert isinstance(rows[seq], Row)

    async def tamper_attachment(self, digest: str) -> None:
        data = bytearray(self.data.attachments[digest])
        data[len(data) // 2] ^= 0x01
        self.data.attachments[digest] = bytes(data)
