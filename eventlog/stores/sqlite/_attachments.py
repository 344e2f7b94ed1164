"""The SQLite side of attachments: one table, content-addressed, shared by every session.

``{prefix}attachments(digest TEXT PRIMARY KEY, data BLOB NOT NULL)`` (the store's
``table_prefix`` before the name, like every table of the store's). The table is created by the
first put, inside its transaction, so a database written before attachments existed is opened
read-only as before and gains the table only when one is stored.

A put replaces stored bytes that no longer hash to their digest (see
:func:`eventlog._attachments.replaces`); deleting a session removes the bytes no other stored
event mentions (:func:`forget_attachments`, in the delete's transaction: SQLite runs one write
transaction at a time, so an event stored before the delete keeps its bytes).
"""

from __future__ import annotations

import sqlite3

from ..._attachments import MENTION, mentioned_digests, replaces, unmentioned
from ._schema import has_table
from ._transaction import transaction

__all__ = ("forget_attachments", "insert_attachment", "select_attachment")

_CREATE = "CREATE TABLE IF NOT EXISTS {p}attachments (digest TEXT PRIMARY KEY, data BLOB NOT NULL)"
_PUT = (
    "INSERT INTO {p}attachments (digest, data) VALUES (?, ?)"
    " ON CONFLICT (digest) DO UPDATE SET data = excluded.data"
)
# The payloads that may mention a digest: of the deleted session, of every other one.
_MENTIONS = "SELECT CAST(data AS BLOB) FROM {p}events WHERE session_id = ? AND instr(data, ?) > 0"
_OTHER_MENTIONS = (
    "SELECT CAST(data AS BLOB) FROM {p}events WHERE session_id != ? AND instr(data, ?) > 0"
)


def insert_attachment(connection: sqlite3.Connection, digest: str, data: bytes) -> None:
    """Store ``data`` under ``digest`` unless good bytes are there already; stored bytes that
    no longer hash to ``digest`` are replaced by ``data`` when it does."""
    with transaction(connection):
        connection.execute(_CREATE)
        if replaces(_select(connection, digest), digest, data):
            connection.execute(_PUT, (digest, data))


def select_attachment(connection: sqlite3.Connection, digest: str) -> bytes | None:
    """The stored bytes of ``digest``, or ``None`` (also when no attachment was ever stored)."""
    try:
        return _select(connection, digest)
    except sqlite3.OperationalError:
        if has_table(connection, "attachments"):
            raise
        return None


def _select(connection: sqlite3.Connection, digest: str) -> bytes | None:
    found = connection.execute(
        "SELECT data FROM {p}attachments WHERE digest = ?", (digest,)
    ).fetchone()
    return None if found is None else bytes(found[0])


def forget_attachments(connection: sqlite3.Connection, session_id: str) -> None:
    """Inside the caller's transaction, before the session's events are deleted: delete the
    bytes of every attachment the session references that no other stored event mentions.
    Costs a scan of the other sessions' events only when the session referenced one."""
    table = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '{p}attachments'"
    ).fetchone()
    if table is None:
        return
    mine = connection.execute(_MENTIONS, (session_id, MENTION)).fetchall()
    candidates = mentioned_digests(bytes(row[0]) for row in mine)
    if not candidates:
        return
    others = connection.execute(_OTHER_MENTIONS, (session_id, MENTION))
    gone = unmentioned(candidates, (bytes(row[0]) for row in others))
    others.close()
    connection.executemany(
        "DELETE FROM {p}attachments WHERE digest = ?", [(digest,) for digest in sorted(gone)]
    )
