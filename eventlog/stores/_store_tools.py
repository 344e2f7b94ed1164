"""The tools' side of a store (a base of :class:`~eventlog.stores.LogStore`): raw access for
export, import and audit tools, and what test and fault tools need of the backend without
reaching into it: watching lease refusals, dropping a lease, a simulated crash, raw snapshot
bytes, and the options of a store like this one over a wrapped backend."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import anyio

from .._codec import Row
from .._errors import ValidationError
from .._ids import validate_session_id
from .._registry import EventTypes
from .._snapshot_state import SnapshotState
from ._base import Backend, SessionRecord, Snapshots

__all__ = ("StoreTools",)


class StoreTools:
    """The tools' side of a store; the store sets these fields when it is built."""

    backend: Backend
    types: EventTypes
    url: str
    max_event_bytes: int
    max_nesting: int
    trim_every: int
    _owner: str
    _started: bool
    _closed: bool
    _backend_open: bool

    @property
    def snapshot_states(self) -> tuple[SnapshotState, ...]:
        raise NotImplementedError

    def _check_open(self) -> None:
        raise NotImplementedError

    async def record(self, session_id: str) -> SessionRecord:
        """The session's stored record (id, creation time, parent and fork seq, metadata, and
        the head: the seq of its last durable event), read now.

        :raises ValidationError: the id is malformed.
        :raises SessionNotFoundError: no such session.
        :raises ClosedError: the store is closed.
        """
        self._check_open()
        return await self.backend.get_session(validate_session_id(session_id))

    def read_rows(
        self, session_id: str, from_seq: int = 0, limit: int | None = None
    ) -> AsyncIterator[Sequence[Row]]:
        """The stored rows from ``from_seq`` in seq order, in chunks, at most ``limit`` in all,
        exactly as stored: neither decoded nor verified (:func:`~eventlog.stores.verify_rows`
        does that), so a damaged log can still be exported. A missing session yields nothing;
        read :meth:`record` first to tell it apart.

        :raises ClosedError: the store is closed.
        """
        self._check_open()
        return self.backend.read_rows(session_id, from_seq, limit)

    async def restore(self, record: SessionRecord, rows: Sequence[Row] = ()) -> None:
        """Insert a session exactly as exported: ``record`` and its ``rows``, atomically. The
        rows are stored as given; check them first with :func:`check_import` (the rules of
        ``create`` and ``append``, and ``open``'s loader), or the session may fail to open.

        :raises SessionExistsError: the id is taken (nothing is written).
        :raises ClosedError: the store is closed.
        """
        self._check_open()
        await self.backend.create_session(record, rows)

    # -- for test and fault tools ---------------------------------------------------------------

    #: Set by :meth:`watch_lease_refusals`; the next refused lease sets it.
    _lease_refused: anyio.Event | None = None

    def watch_lease_refusals(self) -> anyio.Event:
        """An event set the first time from now on that this store is refused a session's
        writer lease because a live writer holds it (also each time a waiting
        ``open(..., wait=...)`` looks again), so a test can tell that an open really waited
        before it lets the holder go. A second call starts a new watch."""
        self._lease_refused = anyio.Event()
        return self._lease_refused

    def _note_lease_refused(self) -> None:
        if self._lease_refused is not None:
            self._lease_refused.set()

    async def drop_lease(self, session_id: str) -> None:
        """Clear this store's writer lease on ``session_id`` in the stored record and forget
        it, leaving the open :class:`~eventlog.Session` as it is: what a lease lost to expiry
        looks like. Another store may then open the session, and this store's session is
        fenced at its next write (``ConflictError``). For tests of fencing.

        :raises ValidationError: the id is malformed.
        :raises ClosedError: the store is closed.
        """
        self._check_open()
        await self.backend.release_lease(validate_session_id(session_id), self._owner)

    async def simulate_crash(self) -> None:
        """Close the backend's connections now, as a killed process loses them: nothing
        pending is written and no lease is released. Leave the store with :meth:`aclose`
        afterwards: its final writes and releases then fail (logged, never raised), as a dead
        process's never happen. For crash tests; idempotent."""
        if self._backend_open:
            await self.backend.close()

    async def stored_snapshot(self, session_id: str) -> tuple[int, bytes, bytes] | None:
        """The session's stored snapshot as ``(seq, hash, data)``, unchecked (``data`` is
        the encoded snapshot with its digest), or ``None``: what the store would open from.
        For tests and tools that inspect or damage snapshots.

        :raises ValidationError: the id is malformed, or the backend stores no snapshots.
        :raises ClosedError: the store is closed.
        """
        self._check_open()
        return await self._snapshot_backend().read_snapshot(validate_session_id(session_id))

    async def store_snapshot(self, session_id: str, seq: int, hash: bytes, data: bytes) -> bool:
        """Store raw snapshot bytes as the session's snapshot at ``seq`` (see
        :meth:`Snapshots.write_snapshot`: only if the stored event ``seq`` has ``hash`` and no
        later snapshot is stored); return whether it was stored. Nothing checks ``data``: a
        test writes a damaged snapshot so, to watch ``open`` ignore and report it.

        :raises ValidationError: the id is malformed, or the backend stores no snapshots.
        :raises ClosedError: the store is closed.
        """
        self._check_open()
        backend = self._snapshot_backend()
        return await backend.write_snapshot(validate_session_id(session_id), seq, hash, data)

    def _snapshot_backend(self) -> Snapshots:
        if not isinstance(self.backend, Snapshots):
            raise ValidationError(f"store {self.url!r}: its backend stores no snapshots")
        return self.backend

    def options_over(self, wrap: Callable[[Backend], Backend]) -> dict[str, Any]:
        """The keyword arguments of a new :class:`LogStore` like this one (its event types,
        event size and nesting limits, ``trim_every``, snapshot states, url) over
        ``wrap(backend)``: how a
        tool interposes on a store's backend (``recovery.testing.FaultyStore`` injects write
        faults so). The new store owns the backend from then on: this one must not be used
        afterwards.

        :raises ValidationError: this store was entered already (its backend is in use).
        """
        if self._started or self._closed:
            raise ValidationError(
                f"store {self.url!r} was entered already: wrap a store that is not yet entered"
            )
        return {
            "backend": wrap(self.backend),
            "types": self.types,
            "max_event_bytes": self.max_event_bytes,
            "max_nesting": self.max_nesting,
            "trim_every": self.trim_every,
            "snapshot_states": self.snapshot_states,
            "url": self.url,
        }
