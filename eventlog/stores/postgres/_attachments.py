"""The PostgreSQL side of attachments: one table per schema, content-addressed, shared by every
session: ``attachments(digest text PRIMARY KEY, data bytea NOT NULL)``.

The table is created by the first put (in its transaction), so a schema written before
attachments existed keeps starting without DDL.

A put replaces stored bytes that no longer hash to their digest (see
:func:`eventlog._attachments.replaces`). Deleting a session removes the bytes no other stored
event mentions (:func:`forget_attachments`): the delete takes the events table in ``SHARE ROW
EXCLUSIVE`` mode first, so it waits for the write rounds in flight and holds back new ones
until it commits (only when the session referenced an attachment); an event stored before the
delete keeps its bytes, as on SQLite, whose write transactions run one at a time.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from ..._attachments import MENTION, mentioned_digests, replaces, unmentioned
from ._sql import quote_ident

__all__ = ("forget_attachments", "insert_attachment", "select_attachment")


async def insert_attachment(conn: Any, schema: str, digest: str, data: bytes) -> None:
    """Store ``data`` under ``digest`` unless good bytes are there already; stored bytes that
    no longer hash to ``digest`` are replaced by ``data`` when it does."""
    table = f"{quote_ident(schema)}.attachments"
    async with conn.transaction():
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {table} (digest text PRIMARY KEY, data bytea NOT NULL)"
        )
        # Inserted if missing; else the stored row is locked and read, to be judged here.
        inserted = await conn.fetchval(
            f"INSERT INTO {table} (digest, data) VALUES ($1, $2) ON CONFLICT (digest) DO NOTHING "
            "RETURNING true",
            digest,
            data,
        )
        if inserted:
            return
        stored = await conn.fetchval(
            f"SELECT data FROM {table} WHERE digest = $1 FOR UPDATE", digest
        )
        if replaces(None if stored is None else bytes(stored), digest, data):
            await conn.execute(f"UPDATE {table} SET data = $2 WHERE digest = $1", digest, data)


async def select_attachment(conn: Any, schema: str, digest: str) -> bytes | None:
    """The stored bytes of ``digest``, or ``None`` (also when no attachment was ever stored)."""
    table = f"{quote_ident(schema)}.attachments"
    try:
        found = await conn.fetchval(f"SELECT data FROM {table} WHERE digest = $1", digest)
    except asyncpg.UndefinedTableError:
        return None
    return None if found is None else bytes(found)


async def forget_attachments(conn: Any, schema: str, session_id: str) -> None:
    """Inside the caller's transaction, first, before the session's events are deleted: delete
    the bytes of every attachment the session references that no other stored event mentions.
    Costs a scan of the other sessions' events only when the session referenced one."""
    s = quote_ident(schema)
    if await conn.fetchval("SELECT to_regclass($1) IS NULL", f"{s}.attachments"):
        return
    mine = f"SELECT data FROM {s}.events WHERE session_id = $1 AND strpos(data, $2) > 0"
    if not mentioned_digests(r[0].encode() for r in await conn.fetch(mine, session_id, MENTION)):
        return
    # Writers wait from here to the commit, so no reference is stored unseen meanwhile; the
    # mode conflicts with itself, so two deletes never hold it together (and then deadlock).
    await conn.execute(f"LOCK TABLE {s}.events IN SHARE ROW EXCLUSIVE MODE")
    candidates = mentioned_digests(
        r[0].encode() for r in await conn.fetch(mine, session_id, MENTION)
    )
    others = f"SELECT data FROM {s}.events WHERE session_id != $1 AND strpos(data, $2) > 0"
    gone = candidates
    async for record in conn.cursor(others, session_id, MENTION, prefetch=256):
        gone = unmentioned(gone, [record[0].encode()])
        if not gone:
            return
    await conn.execute(f"DELETE FROM {s}.attachments WHERE digest = ANY($1::text[])", sorted(gone))
