"""A session loaded for reading, with the first integrity fault of its stored log."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from eventlog import EventLogError, Session
from eventlog.stores import LogStore, SessionRecord

from ._unknown import UnknownType, unknown_type

__all__ = ("Loaded", "load_session")

#: Reads of a session replaced while it was read, before the last one is taken as it is.
_ATTEMPTS = 3


@dataclass(frozen=True)
class Loaded:
    """A session opened for reading (no lease) with its stored record.

    :ivar session: read-only; holds the events before ``fault`` when there is one.
    :ivar fault: the first integrity error in the stored log, naming its seq, or ``None``.
    :ivar unknown: the first event of a type the store's registry does not know, when the
        hash chain verifies over the whole log (not a fault: ``session`` holds the events
        before it), or ``None``.
    """

    session: Session
    record: SessionRecord
    fault: EventLogError | None
    unknown: UnknownType | None = None

    @property
    def stored_events(self) -> int:
        return self.record.head + 1


async def load_session(store: LogStore, session_id: str, *, salvage: bool = True) -> Loaded:
    """Load ``session_id`` read-only. With ``salvage`` a damaged log loads up to its first bad
    event (``Loaded.fault`` names it); without, the damage is raised.

    :raises SessionNotFoundError: no such session.
    :raises CorruptLogError: the log is damaged and ``salvage`` is false.
    """
    for attempt in range(_ATTEMPTS):
        record = await store.record(session_id)
        session = await store.open(session_id, salvage=True)
        unknown, fault = await unknown_type(store, session.id, session.salvage_fault)
        # The record and the events must be of one session: one deleted and created again
        # under the same id meanwhile is read again (SessionNotFoundError once it is gone).
        if attempt == _ATTEMPTS - 1 or _same(record, await store.record(session_id)):
            break
        await session.aclose()
    if session.head > record.head:
        # A live writer appended after the record was read, and the open read those events
        # too (verified, up to a head read again): they are stored, and counted.
        record = msgspec.structs.replace(record, head=session.head)
    if fault is not None and not salvage:
        await session.aclose()
        raise fault
    return Loaded(session, record, fault, unknown)


def _same(one: SessionRecord, other: SessionRecord) -> bool:
    """Two reads of a record are of one session: all but the head (which grows) are equal."""
    return msgspec.structs.replace(one, head=-1) == msgspec.structs.replace(other, head=-1)
