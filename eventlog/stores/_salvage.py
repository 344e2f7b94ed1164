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

One interleaving needs more: the session deleted and created again under the same id while its
rows were read (a read is one query per page: its pages may come from both sessions). A read
that finds a fault therefore asks whether it read the session that is stored now (its creation
time, and the stored hash of the last event it loaded); if not, it reads again (a few times at
most), so a fault is reported only for a log that held still while it was read.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from .._errors import AttachmentNotFoundError, CorruptLogError, EventLogError
from .._session import Session
from ._base import Backend, SessionRecord
from ._loader import LogLoader

if TYPE_CHECKING:
    from ._logstore import LogStore

__all__ = ("head_fault", "open_salvaged", "replaced", "settled")

T = TypeVar("T")


async def open_salvaged(store: LogStore, sid: str) -> Session:
    """``store.open(sid, salvage=True)`` after its arguments were checked.

    :raises SessionNotFoundError: no such session (also when it is deleted while being read).
    """
    for attempt in range(_ATTEMPTS):
        record, loader, fault = await _read(store, sid)
        if fault is None or attempt == _ATTEMPTS - 1:
            break
        if not await replaced(store.backend, sid, record, loader.head, loader.last_hash):
            break
    session = store._wrap(sid, loader, record, read_only=True)
    session.salvage_fault = fault
    return session


#: Reads of a session replaced while it was read before its fault is reported as found.
_ATTEMPTS = 3


async def _read(store: LogStore, sid: str) -> tuple[SessionRecord, LogLoader, EventLogError | None]:
    """One read of the session: its record, its loaded log, and the fault that read found."""
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
    return record, loader, fault


async def replaced(
    backend: Backend, sid: str, record: SessionRecord, head: int, last_hash: bytes
) -> bool:
    """Whether the session stored now is not the one read as ``record`` with its events up to
    ``head`` (chain hash ``last_hash``): it was deleted and created again under the same id
    meanwhile. Nothing read (``head`` -1) tells nothing: that read is as good as replaced.

    :raises SessionNotFoundError: the session is gone (deleted while it was read).
    """
    now = await backend.get_session(sid)
    if now.created_at != record.created_at or head < 0:
        return True
    stored = None
    async for chunk in backend.read_rows(sid, head, 1):
        stored = chunk[0]
    return stored is None or stored.hash != last_hash


async def settled(backend: Backend, sid: str, check: Callable[[], Awaitable[T]]) -> T:
    """``await check()``, a read-only check of the session ``sid`` (its attachments, its
    snapshot), whose finding is raised only when the session it read held still: one deleted
    meanwhile is gone, not damaged; one deleted and created again under the same id is checked
    again (a few times at most).

    :raises SessionNotFoundError: no such session, or it was deleted while it was checked.
    """
    for attempt in range(_ATTEMPTS):
        record = await backend.get_session(sid)
        try:
            return await check()
        except (CorruptLogError, AttachmentNotFoundError):
            now = await backend.get_session(sid)  # raises once the session is gone
            if attempt == _ATTEMPTS - 1 or now.created_at == record.created_at:
                raise
    raise AssertionError("unreachable: the last attempt returns or raises")


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
