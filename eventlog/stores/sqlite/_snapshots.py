"""The SQLite side of snapshots: ``{prefix}snapshots(session_id TEXT PRIMARY KEY, seq INTEGER,
hash BLOB, data BLOB)``, one row per session (its latest snapshot).

The table is created by the first snapshot written, inside its transaction (as attachments
are), so a database written before snapshots existed opens unchanged (no migration step) and
gains the table when a session is next flushed past a checkpoint.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import msgspec

from .._snapshots import stored_snapshot
from ._schema import has_table
from ._transaction import transaction

__all__ = ("delete_snapshot", "insert_snapshot", "select_hashes", "select_snapshot")

_CREATE = (
    "CREATE TABLE IF NOT EXISTS {p}snapshots (session_id TEXT PRIMARY KEY, "
    "seq INTEGER NOT NULL, hash BLOB NOT NULL, data BLOB NOT NULL)"
)


def insert_snapshot(
    connection: sqlite3.Connection, session_id: str, seq: int, hash: bytes, data: bytes
) -> bool:
    """Store the snapshot when the stored event ``seq`` has ``hash`` and no later snapshot is
    stored; return whether it was stored."""
    with transaction(connection):
        connection.execute(_CREATE)
        cursor = connection.execute(
            "INSERT INTO {p}snapshots (session_id, seq, hash, data)"
            " SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM {p}events"
            "  WHERE session_id = ? AND seq = ? AND hash = ?)"
            " ON CONFLICT (session_id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash,"
            "  data = excluded.data WHERE excluded.seq >= {p}snapshots.seq",
            (session_id, seq, hash, data, session_id, seq, hash),
        )
        return cursor.rowcount > 0


def select_snapshot(
    connection: sqlite3.Connection, session_id: str
) -> tuple[int, bytes, bytes] | None:
    """The session's snapshot ``(seq, hash, data)``, or ``None`` (also with no table yet).

    :raises CorruptLogError: the row's values are not of their columns' types.
    """
    try:
        found = connection.execute(
            "SELECT seq, hash, data FROM {p}snapshots WHERE session_id = ?", (session_id,)
        ).fetchone()
    except sqlite3.OperationalError:
        if has_table(connection, "snapshots"):
            raise
        return None
    return None if found is None else stored_snapshot(session_id, *found)


def delete_snapshot(connection: sqlite3.Connection, session_id: str) -> None:
    """Delete the session's snapshot, inside the caller's transaction (no table: nothing)."""
    try:
        connection.execute("DELETE FROM {p}snapshots WHERE session_id = ?", (session_id,))
    except sqlite3.OperationalError:
        if has_table(connection, "snapshots"):
            raise


# One statement whatever the number of seqs (a JSON array), so the prefixed connection caches
# one text; each seq is a primary-key lookup.
_SELECT_HASHES = (
    "SELECT seq, hash FROM {p}events WHERE session_id = ? "
    "AND seq IN (SELECT value FROM json_each(?))"
)


def select_hashes(
    connection: sqlite3.Connection, session_id: str, seqs: Sequence[int]
) -> dict[int, bytes]:
    """The stored hash of each of the session's events at ``seqs`` (absent seqs left out)."""
    found = connection.execute(
        _SELECT_HASHES, (session_id, msgspec.json.encode(list(seqs)).decode())
    )
    return {seq: bytes(digest) for seq, digest in found}
