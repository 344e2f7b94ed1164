"""The conformance suite against the real PostgreSQL server, one schema per test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from eventlog import open_store
from eventlog.stores import LogStore
from eventlog.testing import StoreConformance, flip_a_letter
from tests.pg_children.server import fresh_schema, raw_connection, store_url

pytestmark = pytest.mark.postgres


class TestPostgresStore(StoreConformance):
    @pytest.fixture(autouse=True)
    def _schema(self) -> Iterator[None]:
        with fresh_schema() as schema:
            self.schema = schema
            yield

    def make_store(self, **options: Any) -> LogStore:
        return open_store(store_url(self.schema), lease_ttl=5.0, **options)

    async def tamper_event(self, session_id: str, seq: int) -> None:
        conn = await raw_connection()
        try:
            data: str = await conn.fetchval(
                f'SELECT data FROM "{self.schema}".events WHERE session_id = $1 AND seq = $2',
                session_id,
                seq,
            )
            # One letter of the text flipped: still valid JSON, no longer the bytes the hash
            # chain covers.
            flipped = flip_a_letter(data.encode()).decode()
            await conn.execute(
                f'UPDATE "{self.schema}".events SET data = $3 WHERE session_id = $1 AND seq = $2',
                session_id,
                seq,
                flipped,
            )
        finally:
            await conn.close()

    async def tamper_attachment(self, digest: str) -> None:
        conn = await raw_connection()
        try:
            data: bytes = await conn.fetchval(
                f'SELECT data FROM "{self.schema}".attachments WHERE digest = $1', digest
            )
            middle = len(data) // 2
            flipped = data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1 :]
            await conn.execute(
                f'UPDATE "{self.schema}".attachments SET data = $2 WHERE digest = $1',
                digest,
                flipped,
            )
        finally:
            await conn.close()
