"""Opening a session read-only (``open(salvage=True)``) while another process may be writing it,
and the check that a loaded log ends at the stored head.

A read-only open takes no lease, so a live writer (another process, another host) may append
while it reads. Rows are appended in the same transaction that moves the head, and a head only
grows, so the reader reads the head first and the rows after it:

- fewer rows than that head: rows up to it were committed before the read began; they are
  missing (unless the session was deleted meanwhile, which is said as such);
- more rows than that head: a writer moved on meanwhile. The head is read again: at or past the
  last loaded row, the log is healthy (the newest rows are simply newer than the first read);
  still behind it, the head was altered, and the session holds the rows up to the stored head.

A live session therefore never reads as damaged, whatever the interleaving.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._errors import CorruptLogError
from .._session import Session

if TYPE_CHECKING:
    from ._logstore import LogStore

__all__ = ("head_fault", "open_salvaged")


async def open_salvaged(store: LogStore, sid: str) -> Session:
    """``store.open(sid, salvage=True)`` after its arguments were checked.

    :raises SessionNotFoundError: no such session (also when it is deleted while being read).
    """
    backend = store.backend
    record = await backend.get_session(sid)
    loader, fault = await store._load(sid, salvage=True)
    head = loader.head
    if fault is None and head < record.head:
        # Raises SessionNotFoundError when the session was deleted while its rows were read:
        # that is not damage.
        record = await backend.get_session(sid)
        fault = head_fault(sid, head, record.head)
    elif fault is None and head > record.head:
        record = await backend.get_session(sid)
        if record.head < head:
            fault = head_fault(sid, head, record.head)
            loader, _ = await store._load(sid, salvage=True, limit=record.head + 1)
    session = store._wrap(sid, loader, record, read_only=True)
    session.salvage_fault = fault
    return session


def head_fault(sid: str, loaded: int, head: int) -> CorruptLogError | None:
    """The error when the loaded events (up to seq ``loaded``) do not end at the session's
    stored ``head``, naming the first seq in doubt; ``None`` when they do."""
    if loaded < head:
        return CorruptLogError(
            f"session {sid!r}, seq {loaded + 1}: the stored head is {head} but the events from "
            f"seq {loaded + 1} are missing",
            session_id=sid,
            seq=loaded + 1,
            hint="rows were deleted or damaged outside eventlog; open with salvage=True to "
            "read the events before them",
        )
    if loaded > head:
        return CorruptLogError(
            f"session {sid!r}, seq {head + 1}: the stored head is {head} but events up to "
            f"seq {loaded} are stored: the head was altered",
            session_id=sid,
            seq=head + 1,
            hint="the sessions row was altered outside eventlog; open with salvage=True to "
            "read the events up to the stored head",
        )
    return None
