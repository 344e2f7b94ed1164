"""The SQLite side of attachments: one table, content-addressed, shared by every session.

``{prefix}attachments(digest TEXT PRIMARY KEY, data BLOB NOT NULL)`` (the store's
``table_prefix`` before the name, like every table of the store's). The table is created by the
first put, inside its transaction, so a database written before attachments existed is opened
read-only as before and gains the table only when one is stored.
"""

from __future__ import annotations

import sqlite3

from ._transaction import transaction

__all__ = ("insert_attachment", "select_attachment")

_CREATE = "CREATE TABLE IF NOT EXISTS {p}attachments (digest TEXT PRIMARY KEY, data BLOB NOT NULL)"


def insert_attachment(connection: sqlite3.Connection, digest: str, data: bytes) -> None:
    """Store ``data`` under ``digest`` unless it is there already (same digest, same bytes)."""
    with transaction(connection):
        connection.execute(_CREATE)
        connection.execute(
            "INSERT INTO {p}attachments (digest, data) VALUES (?, ?)"
            " ON CONFLICT (digest) DO NOTHING",
            (digest, data),
        )


def select_attachment(connection: sqlite3.Connection, digest: str) -> bytes | None:
    """The stored bytes of ``digest``, or ``None`` (also when no attachment was ever stored)."""
    try:
        found = connection.execute(
            "SELECT data FROM {p}attachments WHERE digest = ?", (digest,)
        ).fetchone()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return None
        raise
    return None if found is None else bytes(found[0])
