"""The memory backend: the reference store, obviously correct, used as the model in tests.

Its "disk" is a :class:`MemoryData` object; give the same object to a second store to act out a
process restart (what was written survives, pending commits and leases do not).
"""

from __future__ import annotations

import bisect
from collections.abc import AsyncIterator, Collection, Sequence
from dataclasses import dataclass, field

import anyio
import msgspec

from .._attachments import mentioned_digests, replaces, unmentioned
from .._codec import Row
from .._errors import SessionBusyError, SessionExistsError
from ._base import (
    Backend,
    SessionInfo,
    SessionRecord,
    Snapshots,
    delete_refused,
    session_not_found,
)
from ._batch import Batch
from ._owners import owner_alive

__all__ = ("MemoryBackend", "MemoryData")

_CHUNK = 1000


@dataclass
class MemoryData:
    """The memory store's durable state: session records and their rows.

    :ivar ids: the ids of ``records`` in order (``list`` pages through it by bisection); built
        from ``records`` when not given, and kept in step by the backend.
    """

    records: dict[str, SessionRecord] = field(default_factory=dict)
    rows: dict[str, list[Row]] = field(default_factory=dict)
    leases: dict[str, str] = field(default_factory=dict)
    attachments: dict[str, bytes] = field(default_factory=dict)
    #: Session id -> its latest snapshot ``(seq, hash, data)``.
    snapshots: dict[str, tuple[int, bytes, bytes]] = field(default_factory=dict)
    ids: list[str] | None = None

    def __post_init__(self) -> None:
        if self.ids is None:
            self.ids = sorted(self.records)

    def restarted(self) -> MemoryData:
        """The same stored data as seen by a new process: leases are gone."""
        return MemoryData(
            records=self.records,
            rows=self.rows,
            attachments=self.attachments,
            snapshots=self.snapshots,
            ids=self.ids,
        )

    def sorted_ids(self) -> list[str]:
        """:attr:`ids`, in id order."""
        assert self.ids is not None  # set in __post_init__
        return self.ids


class MemoryBackend(Backend, Snapshots):
    """Sessions in a dict. Writes are atomic per round, like a transaction."""

    def __init__(self, data: MemoryData | None = None) -> None:
        self.data = data if data is not None else MemoryData()
        self._changed = anyio.Event()
        # The lease each of this store's sessions is written under (see ``write``).
        self._held: dict[str, str] = {}

    async def start(self) -> None:
        self._changed = anyio.Event()

    async def close(self) -> None:
        self._changed.set()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def create_session(self, record: SessionRecord, rows: Sequence[Row] = ()) -> None:
        if record.id in self.data.records:
            raise SessionExistsError(f"session {record.id!r} already exists", session_id=record.id)
        head = rows[-1].seq if rows else -1
        self.data.records[record.id] = msgspec.structs.replace(record, head=head)
        self.data.rows[record.id] = list(rows)
        bisect.insort(self.data.sorted_ids(), record.id)
        self._notify()

    async def get_session(self, session_id: str) -> SessionRecord:
        record = self.data.records.get(session_id)
        if record is None:
            raise session_not_found(session_id)
        return record

    async def read_rows(
        self, session_id: str, from_seq: int, limit: int | None
    ) -> AsyncIterator[Sequence[Row]]:
        await self.get_session(session_id)
        rows = self.data.rows.get(session_id, [])
        stop = len(rows) if limit is None else min(len(rows), from_seq + limit)
        for start in range(from_seq, stop, _CHUNK):
            yield rows[start : min(stop, start + _CHUNK)]

    async def write(self, batches: Sequence[Batch]) -> Collection[str]:
        conflicts = set()
        for batch in batches:
            rows = self.data.rows.get(batch.session_id)
            if rows is None or len(rows) - 1 != batch.expected_head:
                conflicts.add(batch.session_id)
            elif self.data.leases.get(batch.session_id) != self._held.get(batch.session_id):
                conflicts.add(batch.session_id)  # a stale writer: the lease is another's now
        for batch in batches:
            if batch.session_id in conflicts:
                continue
            self.data.rows[batch.session_id].extend(batch.rows)
            record = self.data.records[batch.session_id]
            self.data.records[batch.session_id] = msgspec.structs.replace(
                record, head=batch.rows[-1].seq
            )
        self._notify()
        return conflicts

    async def acquire_lease(self, session_id: str, owner: str) -> None:
        await self.get_session(session_id)
        holder = self.data.leases.get(session_id)
        if holder is not None and holder != owner and owner_alive(holder):
            raise SessionBusyError(
                f"session {session_id!r} is open for writing by {holder}",
                session_id=session_id,
                hint="close the other writer, or wait for its process to end",
            )
        self.data.leases[session_id] = owner
        self._held[session_id] = owner

    async def writer_alive(self, session_id: str) -> bool:
        """See :meth:`~eventlog.stores._base.LeaseReader.writer_alive`: this process's map."""
        return session_id in self.data.leases

    async def release_lease(self, session_id: str, owner: str) -> None:
        if self._held.get(session_id) == owner:
            del self._held[session_id]
        if self.data.leases.get(session_id) == owner:
            del self.data.leases[session_id]

    async def list_sessions(self, after: str | None, limit: int) -> list[SessionInfo]:
        # Keyset paging over the ordered ids: a page costs its sessions, not the store.
        ids = self.data.sorted_ids()
        start = 0 if after is None else bisect.bisect_right(ids, after)
        infos = []
        for sid in ids[start : start + limit]:
            record = self.data.records[sid]
            rows = self.data.rows.get(sid, [])
            infos.append(
                SessionInfo(
                    id=sid,
                    created_at=record.created_at,
                    head=record.head,
                    parent_id=record.parent_id,
                    fork_seq=record.fork_seq,
                    metadata=record.metadata,
                    last_time=rows[-1].time if rows else None,
                )
            )
        return infos

    async def delete_session(self, session_id: str, owner: str, *, force: bool = False) -> None:
        await self.get_session(session_id)
        holder = self.data.leases.get(session_id)
        if not force and holder is not None and holder != owner and owner_alive(holder):
            raise delete_refused(session_id, holder)
        del self.data.records[session_id]
        ids = self.data.sorted_ids()
        del ids[bisect.bisect_left(ids, session_id)]
        rows = self.data.rows.pop(session_id, [])
        candidates = mentioned_digests(row.data for row in rows)
        if candidates:  # the bytes no other stored event mentions go with the session
            others = (row.data for kept in self.data.rows.values() for row in kept)
            for digest in unmentioned(candidates, others):
                self.data.attachments.pop(digest, None)
        self.data.leases.pop(session_id, None)
        self.data.snapshots.pop(session_id, None)
        self._notify()

    async def put_attachment(self, digest: str, data: bytes) -> None:
        if replaces(self.data.attachments.get(digest), digest, data):
            self.data.attachments[digest] = bytes(data)

    async def get_attachment(self, digest: str) -> bytes | None:
        return self.data.attachments.get(digest)

    async def wait_for_change(self, session_id: str, head: int) -> None:
        rows = self.data.rows.get(session_id)
        if rows is None or len(rows) - 1 > head:
            return
        await self._changed.wait()

    async def write_snapshot(self, session_id: str, seq: int, hash: bytes, data: bytes) -> bool:
        rows = self.data.rows.get(session_id)
        if rows is None or not 0 <= seq < len(rows) or rows[seq].hash != hash:
            return False
        stored = self.data.snapshots.get(session_id)
        if stored is not None and stored[0] > seq:
            return False
        self.data.snapshots[session_id] = (seq, bytes(hash), bytes(data))
        return True

    async def read_snapshot(self, session_id: str) -> tuple[int, bytes, bytes] | None:
        return self.data.snapshots.get(session_id)

    async def read_hashes(self, session_id: str, seqs: Sequence[int]) -> dict[int, bytes]:
        rows = self.data.rows.get(session_id, [])
        return {seq: rows[seq].hash for seq in seqs if 0 <= seq < len(rows)}
