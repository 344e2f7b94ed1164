"""The PostgreSQL side of snapshots: ``snapshots(session_id text PRIMARY KEY, seq bigint,
hash bytea, data bytea)`` in the store's schema, one row per session (its latest snapshot).

The table is created by the first snapshot written (in its transaction), so a schema written
before snapshots existed keeps starting without DDL (no migration step).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import asyncpg

from .._snapshots import stored_snapshot
from ._sql import quote_ident

__all__ = ("SnapshotMethods", "delete_snapshot", "insert_snapshot", "select_snapshot")


async def insert_snapshot(
    conn: Any, schema: str, session_id: str, seq: int, hash: bytes, data: bytes
) -> bool:
    """Store the snapshot when the stored event ``seq`` has ``hash`` and no later snapshot is
    stored; return whether it was stored."""
    s = quote_ident(schema)
    async with conn.transaction():
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {s}.snapshots (session_id text PRIMARY KEY, "
            "seq bigint NOT NULL, hash bytea NOT NULL, data bytea NOT NULL)"
        )
        stored = await conn.fetchval(
            f"INSERT INTO {s}.snapshots (session_id, seq, hash, data)"
            f" SELECT $1, $2, $3, $4 WHERE EXISTS (SELECT 1 FROM {s}.events"
            "  WHERE session_id = $1 AND seq = $2 AND hash = $3)"
            " ON CONFLICT (session_id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash,"
            f"  data = excluded.data WHERE excluded.seq >= {s}.snapshots.seq"
            " RETURNING true",
            session_id,
            seq,
            hash,
            data,
        )
    return bool(stored)


async def select_snapshot(
    conn: Any, schema: str, session_id: str
) -> tuple[int, bytes, bytes] | None:
    """The session's snapshot ``(seq, hash, data)``, or ``None`` (also with no table yet).

    :raises CorruptLogError: the row's values are not of their columns' types.
    """
    try:
        found = await conn.fetchrow(
            f"SELECT seq, hash, data FROM {quote_ident(schema)}.snapshots WHERE session_id = $1",
            session_id,
        )
    except asyncpg.UndefinedTableError:
        return None
    return None if found is None else stored_snapshot(session_id, *found)


async def delete_snapshot(conn: Any, schema: str, session_id: str) -> None:
    """Delete the session's snapshot inside the caller's transaction (no table: nothing)."""
    table = f"{quote_ident(schema)}.snapshots"
    if await conn.fetchval("SELECT to_regclass($1)", table) is not None:
        await conn.execute(f"DELETE FROM {table} WHERE session_id = $1", session_id)


class SnapshotMethods:
    """The backend's :class:`~eventlog.stores.Snapshots` methods, for
    :class:`~eventlog.stores.postgres.PostgresBackend` (which provides what is declared here)."""

    schema: str
    _pool: Any

    if TYPE_CHECKING:

        def _check_open(self, session_id: str | None = None) -> None: ...

        def _translate(
            self, action: str, session_id: str | None = None, *, write: bool = True
        ) -> AbstractContextManager[None]: ...

    async def write_snapshot(self, session_id: str, seq: int, hash: bytes, data: bytes) -> bool:
        self._check_open(session_id)
        with self._translate("storing a snapshot", session_id):
            async with self._pool.acquire() as conn:
                return await insert_snapshot(conn, self.schema, session_id, seq, hash, data)

    async def read_snapshot(self, session_id: str) -> tuple[int, bytes, bytes] | None:
        self._check_open(session_id)
        with self._translate("reading a snapshot", session_id, write=False):
            async with self._pool.acquire() as conn:
                return await select_snapshot(conn, self.schema, session_id)

    async def read_hashes(self, session_id: str, seqs: Sequence[int]) -> dict[int, bytes]:
        self._check_open(session_id)
        with self._translate("reading hashes", session_id, write=False):
            found = await self._pool.fetch(
                f"SELECT seq, hash FROM {quote_ident(self.schema)}.events "
                "WHERE session_id = $1 AND seq = ANY($2::bigint[])",
                session_id,
                list(seqs),
            )
        return {seq: bytes(digest) for seq, digest in found}
