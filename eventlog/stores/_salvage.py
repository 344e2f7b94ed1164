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
that finds a fault therefore asks whether it read the session that is stored now (its record
but the head, and the stored hash of the last event it loaded); if not, it reads again (a few
times at most), so a fault is reported only for a log that held still while it was read.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol, TypeVar

import msgspec

from .._codec import GENESIS_HASH, Row, verify_rows
from .._errors import (
    AttachmentNotFoundError,
    CorruptLogError,
    EventLogError,
    SessionNotFoundError,
    UnsupportedFormatError,
)
from .._event import Event
from .._registry import EventTypes
from .._session import Session
from .._session_ports import Opened
from ._base import Backend, SessionRecord
from ._loader import LogLoader
from ._reading import load_log

__all__ = ("follow_events", "head_fault", "open_salvaged", "replaced", "same_session", "settled")

T = TypeVar("T")


class _Store(Protocol):
    """What :func:`open_salvaged` uses of the ``LogStore`` that calls it with itself: the store
    module imports this one, so the store is described here rather than imported."""

    @property
    def backend(self) -> Backend: ...

    @property
    def types(self) -> EventTypes: ...

    def _wrap(
        self, sid: str, loaded: LogLoader, record: SessionRecord, *, writable: bool, opened: Opened
    ) -> Session: ...


async def open_salvaged(store: _Store, sid: str) -> Session:
    """``store.open(sid, salvage=True)`` after its arguments were checked.

    :raises SessionNotFoundError: no such session (also when it is deleted while being read).
    """
    for attempt in range(_ATTEMPTS):
        record, loader, fault = await _read(store, sid)
        if fault is None or attempt == _ATTEMPTS - 1:
            break
        if not await replaced(store.backend, sid, record, loader.head, loader.last_hash):
            break
    return store._wrap(sid, loader, record, writable=False, opened=Opened(salvage_fault=fault))


#: Reads of a session replaced while it was read before its fault is reported as found.
_ATTEMPTS = 3


async def _read(store: _Store, sid: str) -> tuple[SessionRecord, LogLoader, EventLogError | None]:
    """One read of the session: its record, its loaded log, and the fault that read found."""
    backend = store.backend
    record = await backend.get_session(sid)
    loader, fault = await load_log(backend, store.types, sid, salvage=True)
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
            loader, _ = await load_log(
                backend, store.types, sid, salvage=True, limit=record.head + 1
            )
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
    if not same_session(now, record) or head < 0:
        return True
    return await _stored_hash(backend, sid, head) != last_hash


def same_session(one: SessionRecord, other: SessionRecord) -> bool:
    """Whether two reads of a session's record are of one session (not of two created under
    the same id one after the other): all but the head, which grows, are equal."""
    return msgspec.structs.replace(one, head=-1) == msgspec.structs.replace(other, head=-1)


async def _stored_hash(backend: Backend, sid: str, seq: int) -> bytes | None:
    stored = None
    async for chunk in backend.read_rows(sid, seq, 1):
        stored = chunk[0].hash
    return stored


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
        except (CorruptLogError, AttachmentNotFoundError, UnsupportedFormatError):
            now = await backend.get_session(sid)  # raises once the session is gone
            if attempt == _ATTEMPTS - 1 or same_session(now, record):
                raise
    raise AssertionError("unreachable: the last attempt returns or raises")


async def follow_events(
    backend: Backend, sid: str, after: int, decode: Callable[[Row], Event]
) -> AsyncIterator[Event]:
    """:meth:`Store.follow` after its arguments were checked; ``decode(row)`` decodes.

    Each row is checked to chain from the one before it (from the stored row at ``after``): a
    follower reads page by page while the session may be deleted and created again under the
    same id, and must neither run on into the other session's events nor call the seam
    damage. A link that fails is damage only in the session as first read.

    :raises SessionNotFoundError: no such session, or it was deleted (perhaps created again)
        while followed.
    :raises CorruptLogError: a gap or a broken link in the stored chain.
    """
    record = await backend.get_session(sid)
    last = after
    # The hash the next row chains from; unknown (None) until the row at `after` is read.
    prev: bytes | None = GENESIS_HASH if after < 0 else None
    while True:
        async for chunk in backend.read_rows(sid, last + 1 if prev is not None else last, None):
            rows = list(chunk)
            if prev is None:  # the row at `after`: the events after it chain from its hash
                if rows[0].seq != after:
                    await _same_session(backend, sid, record)
                    raise _gap(sid, after, rows[0].seq)
                prev, rows = rows[0].hash, rows[1:]
            try:
                prev = verify_rows(rows, prev, last + 1, session_id=sid)
            except CorruptLogError:
                await _same_session(backend, sid, record, last, prev)
                raise
            for row in rows:
                last = row.seq
                yield decode(row)
        await backend.wait_for_change(sid, last)
        await _same_session(backend, sid, record)


async def _same_session(
    backend: Backend, sid: str, record: SessionRecord, head: int = -1, last_hash: bytes = b""
) -> None:
    """:raises SessionNotFoundError: the session read as ``record`` (up to ``head``, of chain
    hash ``last_hash``, when given) is no longer stored: gone, or its id names another one."""
    now = await backend.get_session(sid)
    if same_session(now, record) and (
        head < 0 or await _stored_hash(backend, sid, head) == last_hash
    ):
        return
    raise SessionNotFoundError(
        f"session {sid!r} was deleted while it was followed (a session of that id was created "
        "again)",
        session_id=sid,
    )


def _gap(sid: str, expected: int, found: int) -> CorruptLogError:
    return CorruptLogError(
        f"session {sid!r}, seq {expected}: follow found seq {found}: events are missing",
        session_id=sid,
        seq=expected,
    )


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
