"""The store contract: the public :class:`Store` protocol and the :class:`Backend` under it.

A *store* turns stored rows into sessions: it decodes, verifies the hash chain, rebuilds the
surface index and hands out :class:`~eventlog.Session` objects whose commits flow through one
group-committing writer. A *backend* is the storage engine underneath (memory, SQLite,
PostgreSQL): it sees only envelope columns and bytes (:class:`~eventlog.codec.Row`), never
payload classes. Guarantees are documented here once; implementations do not repeat them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from typing import Any, Protocol, runtime_checkable

import msgspec

from ..codec import Row
from ..errors import SessionNotFoundError
from ..event import Event
from ..session import Session
from ..writer import Batch

__all__ = (
    "Backend",
    "SessionInfo",
    "SessionRecord",
    "Store",
    "rows_in_chunks",
    "session_not_found",
)


def session_not_found(session_id: str) -> SessionNotFoundError:
    """The one error every backend raises for a missing session (its text is asserted)."""
    return SessionNotFoundError(f"session {session_id!r} does not exist", session_id=session_id)


async def rows_in_chunks(
    fetch: Callable[[int, int], Awaitable[Sequence[Row]]],
    from_seq: int,
    limit: int | None,
    chunk: int,
) -> AsyncIterator[Sequence[Row]]:
    """A backend's ``read_rows`` as pages: ``await fetch(seq, count)`` returns up to ``count``
    consecutive rows from ``seq``, at most ``limit`` rows in all; a short page is the last.

    One query per page, keyed by seq, so no read snapshot stays open while the consumer holds
    a page (it may take its time; writers must not wait on it).
    """
    remaining = limit
    while remaining is None or remaining > 0:
        count = chunk if remaining is None else min(chunk, remaining)
        rows = await fetch(from_seq, count)
        if rows:
            yield rows
        if len(rows) < count:
            return
        from_seq = rows[-1].seq + 1
        if remaining is not None:
            remaining -= len(rows)


class SessionRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A session's row in the ``sessions`` table, as backends exchange it."""

    id: str
    created_at: int
    parent_id: str | None = None
    fork_seq: int | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    head: int = -1


class SessionInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One entry of :meth:`Store.list`. ``error`` is set (and the rest may be partial) when the
    session's record could not be read; listing never fails because of one bad session."""

    id: str
    created_at: int = 0
    head: int = -1
    parent_id: str | None = None
    fork_seq: int | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    last_time: int | None = None
    error: str | None = None


@runtime_checkable
class Store(Protocol):
    """A place where sessions live. Get one with :func:`eventlog.open_store`.

    Every method raises :class:`~eventlog.ClosedError` after :meth:`aclose` and
    :class:`~eventlog.ValidationError` for a malformed session id.
    """

    async def create(
        self, session_id: str | None = None, metadata: dict[str, Any] | None = None
    ) -> Session:
        """Create an empty session and open it for writing.

        :param session_id: the id to use; a random one when ``None``.
        :param metadata: JSON-serialisable data stored with the session.
        :raises SessionExistsError: the id is taken.
        """
        ...

    async def open(self, session_id: str, *, salvage: bool = False) -> Session:
        """Load a session for writing: decode every event, verify the hash chain, rebuild the
        surface index, and take the session's writer lease.

        With ``salvage=True`` the session is opened read-only, without a lease, holding the
        events before the first one that fails verification; ``session.salvage_fault`` is the
        error that stopped loading (``None`` when the whole log loaded).

        :raises SessionNotFoundError: no such session.
        :raises SessionBusyError: another live writer holds the lease.
        :raises CorruptLogError: a stored event fails verification (names the seq).
        :raises UnsupportedFormatError: a stored event has an unknown, non-ignorable type.
        """
        ...

    async def list(self, after: str | None = None, limit: int = 100) -> list[SessionInfo]:
        """Up to ``limit`` sessions with ids greater than ``after``, ordered by id.

        A session whose record cannot be read is listed with ``error`` set.
        """
        ...

    def read(
        self, session_id: str, from_seq: int = 0, limit: int | None = None
    ) -> AsyncIterator[Event]:
        """Stream stored events from ``from_seq`` without loading the whole log and without
        taking the lease.

        :raises SessionNotFoundError: no such session.
        :raises CorruptLogError: a stored event does not decode.
        """
        ...

    def follow(self, session_id: str, after: int = -1) -> AsyncIterator[Event]:
        """Yield stored events after ``after``, then live ones as writers store them, without
        gap or duplicate, until the caller stops iterating.

        :raises SessionNotFoundError: no such session (or it was deleted while followed).
        :raises CorruptLogError: a gap in the stored seqs.
        """
        ...

    async def fork(self, session_id: str, boundary: int) -> Session:
        """Create a child session whose log is the parent's stored events ``0..boundary`` (same
        seqs, columns and data, verified under the parent's chain format, then chained anew
        under the child's id in format 2) followed by ``session/forked {parent, boundary}``;
        open it.

        :raises SessionNotFoundError: no such parent.
        :raises ValidationError: ``boundary`` is outside the stored log or inside an open turn.
        """
        ...

    async def delete(self, session_id: str) -> None:
        """Remove a session and all its events.

        :raises SessionNotFoundError: no such session.
        :raises SessionBusyError: the session is open for writing in this store.
        """
        ...

    async def aclose(self) -> None:
        """Write what is pending, release leases and close. Shielded; idempotent."""
        ...


class Backend(Protocol):
    """The storage engine under a store. Rows in, rows out; one writer task calls ``write``.

    Errors from the driver are translated to this library's errors where they are born.
    """

    async def start(self) -> None:
        """Connect; create the schema on first use; refuse a newer format version."""
        ...

    async def close(self) -> None:
        """Release every connection. Idempotent."""
        ...

    async def create_session(self, record: SessionRecord, rows: Sequence[Row] = ()) -> None:
        """Insert a session with initial ``rows`` (for forks) atomically.

        :raises SessionExistsError: the id is taken.
        """
        ...

    async def get_session(self, session_id: str) -> SessionRecord:
        """:raises SessionNotFoundError: no such session."""
        ...

    def read_rows(
        self, session_id: str, from_seq: int, limit: int | None
    ) -> AsyncIterator[Sequence[Row]]:
        """Stored rows from ``from_seq`` in seq order, in chunks, at most ``limit`` in all."""
        ...

    async def write(self, batches: Sequence[Batch]) -> Collection[str]:
        """Write every batch in one transaction; a batch whose ``expected_head`` differs from
        the stored head is skipped and its session id returned. Durable on return.

        :raises StoreWriteError: nothing was written.
        """
        ...

    async def acquire_lease(self, session_id: str, owner: str) -> None:
        """Record ``owner`` as the session's writer; take over a lease whose owner is gone.

        :raises SessionBusyError: a live owner holds it.
        """
        ...

    async def release_lease(self, session_id: str, owner: str) -> None:
        """Clear the lease if ``owner`` holds it."""
        ...

    async def list_sessions(self, after: str | None, limit: int) -> list[SessionInfo]:
        """See :meth:`Store.list`."""
        ...

    async def delete_session(self, session_id: str) -> None:
        """:raises SessionNotFoundError: no such session."""
        ...

    async def wait_for_change(self, session_id: str, head: int) -> None:
        """Return once the stored head of ``session_id`` may have moved past ``head`` (spurious
        returns are allowed; busy loops are not)."""
        ...
