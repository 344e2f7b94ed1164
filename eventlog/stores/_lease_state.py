"""Whether a session's writer is alive right now, read from the backend's lease record.

The one place outside the write path that reads lease state (the ``eventlog`` command and its
web app show a session with a live writer as ``running``). Each backend keeps its lease its own
way and answers through :class:`~eventlog.stores._base.LeaseReader`. Reading never takes, renews
or clears a lease.
"""

from __future__ import annotations

from ._base import LeaseReader
from ._logstore import LogStore

__all__ = ("writer_alive",)


async def writer_alive(store: LogStore, session_id: str) -> bool:
    """``True`` when a live writer holds ``session_id``'s lease.

    A lease whose holder died (SQLite: its process is gone from this host; PostgreSQL: the
    lease expired) does not count; neither does a missing session, a lease that cannot be read,
    or a backend that cannot read leases (all ``False``, never raised: the answer only decides
    how a session is shown).
    """
    backend = store.backend
    if isinstance(backend, LeaseReader):
        return await backend.writer_alive(session_id)
    return False
