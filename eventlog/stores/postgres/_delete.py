"""Deleting a session from PostgreSQL: its record, its events, its snapshot, and the bytes of
the attachments it referenced that no other stored event mentions, in one transaction."""

from __future__ import annotations

from typing import Any

from .._base import delete_refused, session_not_found
from .._owners import owner_alive
from ._attachments import forget_attachments
from ._snapshots import delete_snapshot
from ._sql import Statements

__all__ = ("delete_session",)


async def delete_session(
    conn: Any, sql: Statements, schema: str, session_id: str, owner: str, force: bool
) -> None:
    """Inside the caller's transaction: delete the session; refuse while another live writer
    holds its lease (unless ``force``: that writer is then fenced at its next write).

    :raises SessionNotFoundError: no such session.
    :raises SessionBusyError: refused (see above).
    """
    # First: it may lock the events table, before any row lock is taken (see its docstring).
    await forget_attachments(conn, schema, session_id)
    holder = await conn.fetchrow(sql.lock_lease_holder, session_id)
    if holder is None:
        raise session_not_found(session_id)
    writer, remaining = holder
    if not force and writer is not None and writer != owner:
        if remaining is not None and remaining > 0 and owner_alive(writer):
            raise delete_refused(session_id, writer)
    deleted = await conn.fetchval(sql.delete_session, session_id, sql.channel)
    if deleted is None:
        raise session_not_found(session_id)
    await conn.execute(sql.delete_events, session_id)
    await delete_snapshot(conn, schema, session_id)
