"""The PostgreSQL side of attachments: one table per schema, content-addressed, shared by every
session: ``attachments(digest text PRIMARY KEY, data bytea NOT NULL)``.

The table is created by the first put (in its transaction), so a schema written before
attachments existed keeps starting without DDL.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from ._sql import quote_ident

__all__ = ("insert_attachment", "select_attachment")


async def insert_attachment(conn: Any, schema: str, digest: str, data: bytes) -> None:
    """Store ``data`` under ``digest`` unless it is there already (same digest, same bytes)."""
    table = f"{quote_ident(schema)}.attachments"
    async with conn.transaction():
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {table} (digest text PRIMARY KEY, data bytea NOT NULL)"
        )
        await conn.execute(
            f"INSERT INTO {table} (digest, data) VALUES ($1, $2) ON CONFLICT (digest) DO NOTHING",
            digest,
            data,
        )


async def select_attachment(conn: Any, schema: str, digest: str) -> bytes | None:
    """The stored bytes of ``digest``, or ``None`` (also when no attachment was ever stored)."""
    table = f"{quote_ident(schema)}.attachments"
    try:
        found = await conn.fetchval(f"SELECT data FROM {table} WHERE digest = $1", digest)
    except asyncpg.UndefinedTableError:
        return None
    return None if found is None else bytes(found)
