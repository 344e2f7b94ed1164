"""Whether a session's writer is alive right now, read from the backend's lease record.

The one place outside the write path that reads lease state (the ``eventlog`` command and its
web app show a session with a live writer as ``running``). Each backend keeps its lease its own
way: SQLite ``sessions.writer``, a ``host:pid:random`` token whose process is checked;
PostgreSQL ``writer`` and ``lease_until`` on the server's clock; memory, this process's map.
Reading never takes, renews or clears a lease.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from .logstore import LogStore

__all__ = ("writer_alive",)


async def writer_alive(store: LogStore, session_id: str) -> bool:
    """``True`` when a live writer holds ``session_id``'s lease.

    A lease whose holder died (SQLite: its process is gone from this host; PostgreSQL: the
    lease expired) does not count; neither does a missing session, a lease that cannot be read,
    or a backend of a kind this function does not know (all ``False``, never raised: the answer
    only decides how a session is shown).
    """
    backend: Any = store.backend
    kind = type(backend).__name__
    if kind == "SQLiteBackend":
        return _sqlite_writer_alive(backend.path, backend.table_prefix, session_id)
    if kind == "PostgresBackend":
        return await _postgres_writer_alive(backend, session_id)
    if kind == "MemoryBackend":
        return session_id in backend.data.leases
    return False


def _sqlite_writer_alive(path: str, prefix: str, session_id: str) -> bool:
    from ._owners import owner_alive

    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            found = db.execute(
                f"SELECT writer FROM {prefix}sessions WHERE id = ?", (session_id,)
            ).fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return False
    holder = None if found is None else found[0]
    return holder is not None and owner_alive(holder)


async def _postgres_writer_alive(backend: Any, session_id: str) -> bool:
    try:
        found = await backend._pool.fetchrow(backend._sql.lease_holder, session_id)
    except Exception:  # a lease we cannot read says nothing about the run
        return False
    if found is None:
        return False
    writer, remaining = found
    return writer is not None and remaining is not None and remaining > 0
