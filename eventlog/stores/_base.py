"""The store contract: the public :class:`Store` protocol and the :class:`Backend` under it.

A *store* turns stored rows into sessions: it decodes, verifies the hash chain, rebuilds the
surface index and hands out :class:`~eventlog.Session` objects whose commits flow through one
group-committing writer. A *backend* is the storage engine underneath (memory, SQLite,
PostgreSQL): it sees only envelope columns and bytes (:class:`~eventlog.stores.Row`), never
payload classes. Guarantees are documented here once; implementations do not repeat them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterable, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

import anyio
import msgspec
from anyio.abc import TaskStatus

from .._codec import Row
from .._errors import SessionBusyError, SessionNotFoundError
from .._event import Event
from .._message import Message
from .._session import Session
from ._abilities import BackendAbilities
from ._batch import Batch, WriteDone

__all__ = (
    "Backend",
    "BackgroundTask",
    "LeaseReader",
    "MaskedUrl",
    "SessionInfo",
    "SessionRecord",
    "Snapshots",
    "ATTACHMENT_COLUMNS",
    "SNAPSHOT_COLUMNS",
    "STORE_TABLES",
    "TABLE_COLUMNS",
    "Store",
    "delete_refused",
    "rows_in_chunks",
    "session_not_found",
)

#: The columns every SQL backend's tables have (docs/stores.md). A table of one of these names
#: without them is another application's, and is refused before anything is created.
TABLE_COLUMNS: dict[str, frozenset[str]] = {
    "meta": frozenset({"format_version"}),
    "sessions": frozenset(
        {"id", "created_at", "parent_id", "fork_seq", "metadata", "head", "writer"}
    ),
    "events": frozenset(
        {"session_id", "seq", "type", "time", "surface", "sources", "ignorable", "data", "hash"}
    ),
}
#: The table a store creates with its first attachment; one of this name without these columns
#: is another application's, and is refused in the same way.
ATTACHMENT_COLUMNS: frozenset[str] = frozenset({"digest", "data"})
#: Likewise for the snapshots table, created with a session's first snapshot.
SNAPSHOT_COLUMNS: frozenset[str] = frozenset({"session_id", "seq", "hash", "data"})
#: Every table a store makes (attachments and snapshots on first use): what a command that
#: must not write looks for, and what a refused import drops again.
STORE_TABLES: tuple[str, ...] = (*TABLE_COLUMNS, "attachments", "snapshots")


def session_not_found(session_id: str) -> SessionNotFoundError:
    """The one error every backend raises for a missing session (its text is asserted)."""
    return SessionNotFoundError(f"session {session_id!r} does not exist", session_id=session_id)


def delete_refused(session_id: str, holder: str) -> SessionBusyError:
    """The one error every backend raises when ``delete`` meets another live writer's lease."""
    return SessionBusyError(
        f"session {session_id!r} is open for writing by {holder}; not deleted",
        session_id=session_id,
        hint="close the other writer first, or delete with force=True (it is then fenced at "
        "its next write)",
    )


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
    """A session's row in the ``sessions`` table, as backends exchange it: the one definition
    of a session's record. :class:`SessionInfo` (a ``list`` entry) and the export format's
    session line extend it; the CLI, the report and the web app format it.

    :ivar head: the seq of the session's last durable event (``-1``: none).
    """

    id: str
    created_at: int
    parent_id: str | None = None
    fork_seq: int | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    head: int = -1


class SessionInfo(SessionRecord, frozen=True, kw_only=True):
    """One entry of :meth:`Store.list`: the session's record and the time of its last event.
    ``error`` is set (and the rest may be partial: ``created_at`` is then 0 when unread) when
    the session's record could not be read; listing never fails because of one bad session.

    :ivar last_time: the ``time`` of the event at ``head`` (``None``: no event).
    """

    created_at: int = 0
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

    async def open(
        self,
        session_id: str,
        *,
        salvage: bool = False,
        wait: float = 0.0,
        verify: str = "snapshot",
        keep_whole: bool = False,
    ) -> Session:
        """Load a session for writing: take the session's writer lease, load its events,
        verify that they end at the session's stored head, rebuild the surface index.

        ``verify="snapshot"`` (the default): start from the session's latest stored snapshot
        when it matches the stored chain (its hash is the stored event's at its seq, and each
        event it holds hashes from the stored hash before it to its own stored one), then
        decode and verify the hash chain of every event after it; the session holds in memory
        only those and the events on the surface (older ones: ``await session.events()``). A
        snapshot that does not match, does not decode or is of an unknown format is ignored
        and reported in ``session.snapshot_fault`` (the whole log is replayed instead).
        ``verify="full"``: decode every event and verify the whole hash chain, as
        ``eventlog verify`` does. ``keep_whole=True``: that, and it is never trimmed.

        A lease whose owner is known to be gone (a process of this host that ended, or a
        closed store of this process) is taken over at once; with ``wait`` the open waits up
        to that many seconds for a live holder to let go before raising ``SessionBusyError``.

        With ``salvage=True`` the session is opened read-only, without a lease, holding the
        events before the first one that fails verification; ``session.salvage_fault`` is the
        error that stopped loading (``None`` when the whole log loaded). A writer appending
        meanwhile, or the session deleted and created again under the same id, is never read
        as damage (such a read is made again).

        :raises SessionNotFoundError: no such session.
        :raises SessionBusyError: another live writer holds the lease (still, after ``wait``).
        :raises CorruptLogError: a stored event fails verification, or the stored events end
            before or after the stored head (names the first seq in doubt).
        :raises ValidationError: ``wait`` is not a number of seconds >= 0, or ``verify``
            (``keep_whole``) is not ``"snapshot"`` or ``"full"`` (a bool).
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

        :raises SessionNotFoundError: no such session (or it was deleted while followed, even
            if one of that id was created again: its events are never followed on into).
        :raises CorruptLogError: a gap in the stored seqs, or an event that does not chain.
        """
        ...

    async def fork(self, session_id: str, boundary: int, *, child_id: str | None = None) -> Session:
        """Create a child session whose log is the parent's stored events ``0..boundary`` (same
        seqs, columns and data, verified under the parent's chain format, then chained anew
        under the child's id in format 2) followed by ``session/forked {parent, boundary}``;
        open it. The child's id is ``child_id``, or a new random one.

        :raises SessionNotFoundError: no such parent.
        :raises ValidationError: ``boundary`` is outside the stored log or inside an open turn,
            or ``child_id`` is malformed.
        :raises SessionExistsError: ``child_id`` is taken.
        """
        ...

    async def delete(self, session_id: str, *, force: bool = False) -> None:
        """Remove a session, all its events and its snapshot, and, in the same transaction,
        the bytes of every attachment it referenced that no other stored event references
        (an attachment put but never referenced belongs to no session, and stays). A
        reference another store (another process) stored before the delete keeps the bytes;
        one stored after it (its bytes put before the delete) finds them gone: reads and
        ``eventlog verify`` raise ``AttachmentNotFoundError``, and putting the bytes again
        repairs it.

        :param force: delete even while another live writer (another store, in this process or
            another) holds the session's lease; that writer is fenced at its next write (its
            flush raises ``ConflictError``), and never writes into a session created again
            under the same id.
        :raises SessionNotFoundError: no such session.
        :raises SessionBusyError: the session is open for writing in this store, or (without
            ``force``) another live writer holds its lease.
        """
        ...

    async def put_attachment(self, data: bytes | bytearray | memoryview) -> str:
        """Store ``data`` once, content-addressed, and return its digest (``"sha256:<hex>"``)
        for an :class:`~eventlog.ImagePart` or :class:`~eventlog.FilePart` to reference.
        Durable on return; storing the same bytes again stores nothing, except that stored
        bytes that no longer hash to the digest (damaged) are replaced: putting the right
        bytes again repairs an attachment. Attachments are shared by content between sessions
        (forks share them); :meth:`delete` removes those no remaining session references.
        Put the bytes right before appending the event that references them.

        :raises ValidationError: ``data`` is not bytes, a bytearray or a memoryview.
        :raises StoreWriteError: nothing was written.
        """
        ...

    async def get_attachment(self, digest: str) -> bytes:
        """The bytes stored under ``digest``, checked against it on every read.

        :raises ValidationError: ``digest`` is not ``"sha256:"`` and 64 lowercase hex digits.
        :raises AttachmentNotFoundError: nothing is stored under ``digest``.
        :raises CorruptLogError: the stored bytes no longer hash to ``digest``.
        """
        ...

    async def load_attachments(self, messages: Iterable[Message]) -> dict[str, bytes]:
        """The bytes of every attachment ``messages`` reference, by digest (checked as by
        :meth:`get_attachment`): what the provider converters take as ``attachments``.

        :raises ValidationError: ``messages`` is not an iterable of :class:`~eventlog.Message`.
        :raises AttachmentNotFoundError: one is not stored.
        :raises CorruptLogError: one was altered.
        """
        ...

    async def verify_attachments(self, session_id: str) -> int:
        """Check every attachment the session's stored events reference (present, and hashing
        to its digest); return how many distinct attachments were checked. ``open`` does not
        read attachments (it costs nothing for them); this, ``eventlog verify`` and every read
        do.

        :raises SessionNotFoundError: no such session, or it was deleted while checked (one
            created again under the id meanwhile is checked again).
        :raises AttachmentNotFoundError: one is missing (names the first event referencing it).
        :raises CorruptLogError: one was altered (names the first event referencing it).
        """
        ...

    async def verify_snapshot(self, session_id: str) -> int | None:
        """Check the session's stored snapshot against its log: rebuild from the stored events
        up to the snapshot's seq everything it holds (the covered event's hash, the surface and
        its events, the turn grammar, the projections' states) and compare. Return the seq it
        covers, or ``None`` when none is stored. ``open`` checks less (the events a snapshot
        holds, against the chain; see :meth:`open`); this, and ``eventlog verify``, check all.

        :raises SessionNotFoundError: no such session, or it was deleted while checked (one
            created again under the id meanwhile is checked again).
        :raises CorruptLogError: the snapshot does not match the log (naming its seq), or the
            log up to it fails verification.
        """
        ...

    async def aclose(self) -> None:
        """Write what is pending, release leases and close. Shielded; idempotent; never
        raises because a write fails.

        If the final write of a session fails (disk full, connection lost), the store closes
        anyway: that session's events after ``session.durable`` are discarded (they were never
        stored; its last ``flush()`` raised ``StoreWriteError``, and a warning is logged naming
        the seqs), and its writer lease is released. Should releasing fail as well, the lease
        names a closed store: the next store of this process takes it over at once, and so
        does any store once this process has ended. Afterwards ``flush()`` and ``append``
        raise ``ClosedError``.
        """
        ...


@runtime_checkable
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
        the stored head, or whose session's lease is no longer the one this backend acquired
        (taken over, or the session deleted and created again), is skipped and its session id
        returned. Durable on return.

        :raises StoreWriteError: nothing was written.
        """
        ...

    #: What the store's writer may do with this backend's write rounds (data, read once when
    #: the store is built); a backend that declares nothing is written one round at a time.
    abilities: ClassVar[BackendAbilities] = BackendAbilities()

    def start_write(self, batches: Sequence[Batch], done: WriteDone) -> None:
        """Start :meth:`write` of ``batches`` on the backend's own thread now and return at
        once; ``done(conflicts, error)`` is called on the event loop's thread when it ended.
        Called only when :attr:`abilities` says :attr:`~eventlog.stores.Pipeline.THREAD`.

        :raises ClosedError: the backend is closed (nothing was started).
        :raises TypeError: the backend declares no such pipeline (this default).
        """
        raise TypeError(f"{type(self).__name__} writes no round on a thread of its own")

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

    async def delete_session(self, session_id: str, owner: str, *, force: bool = False) -> None:
        """Delete a session (see :meth:`Store.delete`: with it, the attachment bytes no other
        stored event mentions); ``owner`` is the deleting store's lease token.

        :raises SessionNotFoundError: no such session.
        :raises SessionBusyError: without ``force``, a live owner other than ``owner`` holds
            the lease.
        """
        ...

    async def put_attachment(self, digest: str, data: bytes) -> None:
        """Store ``data`` under its content address ``digest`` (the caller computed it) unless
        bytes hashing to ``digest`` are stored already; stored bytes that do not (damaged) are
        replaced by ``data`` if it does. Durable on return.

        :raises StoreWriteError: nothing was written.
        """
        ...

    async def get_attachment(self, digest: str) -> bytes | None:
        """The bytes stored under ``digest`` as stored (unchecked), or ``None``."""
        ...

    async def wait_for_change(self, session_id: str, head: int) -> None:
        """Return once the stored head of ``session_id`` may have moved past ``head`` (spurious
        returns are allowed; busy loops are not)."""
        ...


# -- optional abilities of a backend: a store checks for each with isinstance ------------------


@runtime_checkable
class BackgroundTask(Protocol):
    """A backend that needs a task of its own while open (PostgreSQL: the lease heartbeat and
    the notifier). The store runs :meth:`run_background` in its task group and cancels it at
    close."""

    async def run_background(
        self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Run until cancelled; call ``task_status.started()`` once running."""
        ...


@runtime_checkable
class LeaseReader(Protocol):
    """A backend that can tell whether a session's writer is alive right now, from its lease
    record, without taking, renewing or clearing the lease."""

    async def writer_alive(self, session_id: str) -> bool:
        """``True`` when a live writer holds the lease; ``False`` for a dead holder, a missing
        session or a lease that cannot be read (never raised)."""
        ...


@runtime_checkable
class Snapshots(Protocol):
    """A backend that stores snapshots (docs/stores.md): at most one per session, the latest.
    Deleting a session deletes its snapshot; creating one (fork, import) stores none."""

    async def write_snapshot(self, session_id: str, seq: int, hash: bytes, data: bytes) -> bool:
        """Store ``data`` as the session's snapshot at ``seq``, replacing an older one, only if
        the stored event ``seq`` has chain hash ``hash`` and no snapshot at a later seq is
        stored; return whether it was stored. Its own small transaction, durable on return.

        :raises StoreWriteError: nothing was written.
        """
        ...

    async def read_snapshot(self, session_id: str) -> tuple[int, bytes, bytes] | None:
        """The session's stored snapshot as ``(seq, hash, data)``, unchecked, or ``None``."""
        ...

    async def read_hashes(self, session_id: str, seqs: Sequence[int]) -> dict[int, bytes]:
        """The stored chain hash of each of the session's events at ``seqs`` (seqs with no
        stored event are left out): what binds a snapshot's events to the chain, in one read
        whatever their number."""
        ...


@runtime_checkable
class MaskedUrl(Protocol):
    """A backend whose URL may carry a secret: reprs and messages show :attr:`display_url`."""

    display_url: str
