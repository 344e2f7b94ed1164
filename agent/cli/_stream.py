"""A stored log read as a stream: each event verified (seq, hash chain) and decoded as it comes,
in constant memory, so the first one is in hand before the rest are read."""

from __future__ import annotations

from collections.abc import AsyncIterator

from eventlog import Event
from eventlog.stores import (
    GENESIS_HASH,
    LogStore,
    SessionRecord,
    decode_event,
    stored_version,
    verify_rows,
)

__all__ = ("verified_events",)


async def verified_events(
    store: LogStore, record: SessionRecord
) -> AsyncIterator[tuple[Event, int]]:
    """Yield the stored events of ``record`` up to its head, in seq order, each once its hash
    chains to the one before it, with the payload version it was stored as (upcast on read).

    :raises CorruptLogError: at the first event that fails verification, after every event
        before it was yielded.
    :raises UnsupportedFormatError: an event does not decode.
    """
    prev, seq = GENESIS_HASH, 0
    async for chunk in store.read_rows(record.id, 0, record.head + 1):
        for row in chunk:
            prev = verify_rows([row], prev, seq, session_id=record.id)
            seq += 1
            yield decode_event(row, store.types, session_id=record.id), stored_version(row.data)
