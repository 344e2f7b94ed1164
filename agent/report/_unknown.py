"""A stored event of a type the reader's registry does not know: a state of its own.

An app that registers its own event types without ``ignorable=True`` writes sessions that a
reader without its registry cannot decode past the first such event. That is not damage: the
hash chain still verifies over every stored row. :func:`unknown_type` tells the two apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from eventlog import EventLogError, UnsupportedFormatError
from eventlog.stores import LogStore, verify_rows

__all__ = ("UnknownType", "unknown_type")


@dataclass(frozen=True)
class UnknownType:
    """The first stored event whose type is not registered (and was not written ignorable).

    :ivar type: its type name.
    :ivar seq: its seq; the session read holds the events before it.
    :ivar events: the stored events over which the hash chain was verified (all of them).
    """

    type: str
    seq: int
    events: int

    def __str__(self) -> str:
        return f"unknown type {self.type!r} at seq {self.seq}"

    @property
    def hint(self) -> str:
        return "load the app's registry with --types module:attribute to read past it"


async def unknown_type(
    store: LogStore, session_id: str, fault: EventLogError | None
) -> tuple[UnknownType | None, EventLogError | None]:
    """Class a salvage ``fault``: ``(UnknownType, None)`` when it is an event of an unknown type
    and the hash chain verifies over the whole stored log; else ``(None, fault)``, the fault
    unchanged or the first chain error found after the unknown event.
    """
    if not isinstance(fault, UnsupportedFormatError) or fault.seq is None:
        return None, fault
    row = None
    async for chunk in store.read_rows(session_id, fault.seq, 1):
        row = chunk[0] if chunk else row
    if row is None or row.ignorable or row.type in store.types:
        return None, fault
    previous, count = b"", 0
    try:
        async for chunk in store.read_rows(session_id, 0, None):
            rows = list(chunk)
            previous = verify_rows(rows, previous, count, session_id=session_id)
            count += len(rows)
    except EventLogError as exc:
        return None, exc
    return UnknownType(type=row.type, seq=row.seq, events=count), None
