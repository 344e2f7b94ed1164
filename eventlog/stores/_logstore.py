"""The one :class:`Store` implementation, over any :class:`Backend`.

Decoding, hash-chain verification, surface rebuild, leases and the writer live here once, so
every backend gets the same semantics and the conformance suite tests them all alike.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import AsyncIterator, Iterable
from functools import partial
from types import TracebackType
from typing import Any

import anyio
from anyio.abc import TaskGroup

from .._attachments import attached_digests, attachment_bytes
from .._codec import (
    Row,
)
from .._errors import (
    ClosedError,
    EventLogError,
    SessionBusyError,
    ValidationError,
)
from .._event import Event
from .._ids import new_session_id, validate_session_id
from .._message import Message
from .._registry import EventTypes
from .._session import Session
from .._session_ports import DEFAULT_MAX_EVENT_BYTES, Opened, SessionPorts
from .._snapshot_state import SnapshotState
from .._strict import (
    DEFAULT_MAX_NESTING,
    INT64_MAX,
    INT64_MIN,
    MAX_NESTING_CEILING,
    check_int,
    check_number,
    check_text,
)
from ._args import checked_metadata, decoded, wait_seconds
from ._attachment_reads import checked_attachment, verify_session
from ._base import (
    Backend,
    BackgroundTask,
    SessionInfo,
    SessionRecord,
    Store,
)
from ._checkpointer import Checkpointer
from ._fork import fork_log
from ._loader import LogLoader
from ._owners import new_owner, retire_owner
from ._reading import load_after, load_log
from ._salvage import follow_events, head_fault, open_salvaged, settled
from ._snapshot_check import verify_snapshot
from ._snapshots import Restored
from ._states import DEFAULT_SNAPSHOT_STATES, resolve_snapshot_states
from ._store_tools import StoreTools
from ._writer import Writer

__all__ = ("DEFAULT_SNAPSHOT_EVERY", "DEFAULT_TRIM_EVERY", "LogStore", "lease_owner")

logger = logging.getLogger("eventlog.store")

#: Seconds between attempts to take a lease while ``open(..., wait=...)`` waits for it.
_LEASE_POLL = 0.05
#: Default of ``snapshot_every``: a snapshot at most every this many events (and after each
#: compaction). A snapshot holds the surface, so a mid-way one of a compacting session costs
#: O(surface); at 1,000 those made appending and flushing the open benchmark's workload 20%
#: slower, at 4,000 they are gone for it (a compaction every 2,000 events: its snapshots hold a
#: one-node surface) and ``open`` replays at most 4,000 events after a snapshot
#: (benchmarks/OPEN.md).
DEFAULT_SNAPSHOT_EVERY = 4000
#: Default of ``trim_every``: a live session drops the events its snapshots cover once this
#: many have gathered. Memory then stays within this many events plus the surface plus the
#: events since the latest snapshot (benchmarks/OPEN.md, "live session memory"), and a
#: session shorter than this (most chats, every test) keeps its whole log readable
#: synchronously, as before trimming.
DEFAULT_TRIM_EVERY = 10_000
_VERIFY = ("snapshot", "full")


def lease_owner() -> str:
    """A lease owner token: ``host:pid:random`` (see :mod:`._owners` for liveness)."""
    return new_owner()


class LogStore(StoreTools, Store):
    """A :class:`~eventlog.Store` over a backend; use as an async context manager.

    :param backend: the storage engine.
    :param types: the event types sessions accept and decode (core vocabulary by default).
    :param write_delay: seconds the background writer gathers events before a round.
    :param max_pending_bytes: backlog ceiling before ``append`` raises ``BacklogFullError``.
    :param max_event_bytes: ceiling of one event's encoded payload.
    :param max_nesting: how deep containers may nest in a payload or in session metadata
        (default 64, at most 256); deeper values are refused at commit.
    :param snapshot_every: write a snapshot of a session's state (docs/stores.md) once this
        many events were flushed since its last one, and after each flushed compaction (a
        surface ``Replace``); 0 turns snapshots off (``open`` then always replays).
    :param trim_every: a writable session drops from memory, at a snapshot taken while it is
        open, the events that snapshot covers and that are not on its surface, as if it had
        been reopened from it, once at least this many would go (``Session.trims``;
        docs/stores.md); 0 keeps every event a session loaded or appended in memory until it
        is closed. Sessions opened with ``keep_whole=True`` never drop any.
    :param snapshot_states: the projection states snapshots carry: a sequence of
        :class:`~eventlog.SnapshotState`, or a ``"module:attribute"`` reference to one; by
        default the projections' (see :mod:`eventlog.stores._states`).
    :param url: shown in ``repr``.
    :raises ValidationError: an option has the wrong type or is out of range.
    """

    def __init__(
        self,
        backend: Backend,
        *,
        types: EventTypes | None = None,
        write_delay: float = 0.010,
        max_pending_bytes: int = 64 * 1024 * 1024,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        max_nesting: int = DEFAULT_MAX_NESTING,
        snapshot_every: int = DEFAULT_SNAPSHOT_EVERY,
        trim_every: int = DEFAULT_TRIM_EVERY,
        snapshot_states: object = DEFAULT_SNAPSHOT_STATES,
        url: str = "",
    ) -> None:
        check_number("write_delay", write_delay, low=0.0, high=3600.0)
        check_number("max_pending_bytes", max_pending_bytes, low=1, integer=True)
        check_number("max_event_bytes", max_event_bytes, low=1, integer=True)
        check_number("max_nesting", max_nesting, low=1, high=MAX_NESTING_CEILING, integer=True)
        check_number("snapshot_every", snapshot_every, low=0, high=INT64_MAX, integer=True)
        check_number("trim_every", trim_every, low=0, high=INT64_MAX, integer=True)
        if types is not None and not isinstance(types, EventTypes):
            raise ValidationError("option types must be an EventTypes registry")
        self.backend = backend
        self.max_nesting = max_nesting
        self.types = types if types is not None else EventTypes()
        self.url = url
        self.max_event_bytes = max_event_bytes
        self.trim_every = trim_every
        self._open: dict[str, Session] = {}
        self._checkpointer = checkpointer = Checkpointer(
            backend,
            self.types,
            every=snapshot_every,
            trim_every=trim_every,
            states=resolve_snapshot_states(snapshot_states),
            sessions=self._open,
        )
        self._writer = Writer(
            checkpointer.keeping_rows(backend.write),
            start=checkpointer.starting_keeping_rows(backend.start_write),
            pipeline=backend.abilities.pipeline,
            write_delay=write_delay,
            max_pending_bytes=max_pending_bytes,
        )
        self._owner = lease_owner()
        self._task_group: TaskGroup | None = None
        self._started = False
        self._closed = False
        self._backend_open = False

    # -- lifecycle -----------------------------------------------------------------------------

    async def __aenter__(self) -> LogStore:
        await self.backend.start()
        self._backend_open = True
        try:
            self._task_group = anyio.create_task_group()
            await self._task_group.__aenter__()
            self._checkpointer.start(self._task_group)
            await self._writer.start(self._task_group)
            # A backend may need a task of its own while open (PostgreSQL: the lease heartbeat).
            if isinstance(self.backend, BackgroundTask):
                await self._task_group.start(self.backend.run_background)
        except BaseException:
            self._backend_open = False
            await self.backend.close()
            raise
        self._started = True
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """See :meth:`Store.aclose`. A session whose final write fails is closed without it:
        its events after ``session.durable`` are discarded (never stored; the failed
        ``flush()`` had raised ``StoreWriteError``; a warning names them) and its lease is
        released. If releasing fails too (the disk is still full), the lease names a store
        that is gone: the next store of this process, or of any process once this one has
        ended, takes it over at once."""
        if self._closed:
            return
        self._closed = True
        try:
            with anyio.CancelScope(shield=True):
                for session in list(self._open.values()):
                    try:
                        await session.aclose()
                    except EventLogError as exc:
                        await self._abandon(session, exc)
                await self._writer.aclose()
                await self._checkpointer.aclose()
        finally:
            retire_owner(self._owner)
            # The task group's scope must be exited outside the shield scope above.
            if self._task_group is not None:
                self._task_group.cancel_scope.cancel()
                await self._task_group.__aexit__(None, None, None)
                self._task_group = None
            with anyio.CancelScope(shield=True):
                self._backend_open = False
                await self.backend.close()

    async def _abandon(self, session: Session, error: EventLogError) -> None:
        """Close ``session`` although its last flush failed (see :meth:`aclose`)."""
        if session.head > session.durable and not session.fenced:
            logger.warning(
                "eventlog: session %r closed with seqs %d..%d unwritten (discarded): %s",
                session.id,
                session.durable + 1,
                session.head,
                error,
            )
        session.close_unflushed()
        try:
            await self._release(session)
        except EventLogError as exc:  # the token is retired below: the lease is dead anyway
            logger.warning("eventlog: session %r: releasing the lease failed: %s", session.id, exc)

    def __del__(self) -> None:
        if getattr(self, "_started", False) and not self._closed:
            warnings.warn(
                f"store {self.url or self.backend!r} was never closed",
                ResourceWarning,
                stacklevel=1,
            )

    def _check_open(self) -> None:
        if self._closed or not self._started:
            raise ClosedError(
                f"store {self.url!r} is {'closed' if self._closed else 'not started'}",
                hint="use `async with open_store(url) as store:`",
            )

    def __repr__(self) -> str:
        return f"<LogStore {self.url!r} open_sessions={len(self._open)}>"

    @property
    def snapshot_every(self) -> int:
        """A snapshot at most every this many flushed events (0: snapshots off)."""
        return self._checkpointer.every

    @property
    def snapshot_states(self) -> tuple[SnapshotState, ...]:
        """The projection states this store's snapshots carry."""
        return self._checkpointer.states

    # -- sessions ------------------------------------------------------------------------------

    async def create(
        self, session_id: str | None = None, metadata: dict[str, Any] | None = None
    ) -> Session:
        self._check_open()
        sid = validate_session_id(session_id) if session_id is not None else new_session_id()
        record = SessionRecord(
            id=sid,
            created_at=time.time_ns() // 1_000_000,
            metadata=checked_metadata(metadata, self.max_nesting),
        )
        await self.backend.create_session(record)
        await self.backend.acquire_lease(sid, self._owner)
        return self._wrap(sid, LogLoader(self.types, sid), record, writable=True)

    async def open(
        self,
        session_id: str,
        *,
        salvage: bool = False,
        wait: float = 0.0,
        verify: str = "snapshot",
        keep_whole: bool = False,
    ) -> Session:
        self._check_open()
        sid = validate_session_id(session_id)
        wait = wait_seconds(wait, sid)
        if type(salvage) is not bool:
            raise ValidationError(f"salvage must be True or False, got {salvage!r}")
        if type(keep_whole) is not bool:
            raise ValidationError(f"keep_whole must be True or False, got {keep_whole!r}")
        if not isinstance(verify, str) or verify not in _VERIFY:
            raise ValidationError(
                f'verify must be "snapshot" or "full", got {verify!r}', session_id=sid
            )
        if salvage:
            return await open_salvaged(self, sid)
        await self._take_lease(sid, wait)
        try:
            # Read under the lease: no other live writer moves the head meanwhile.
            record = await self.backend.get_session(sid)
            restored: Restored | None = None
            snapshot_fault: str | None = None
            if verify == "snapshot" and not keep_whole:
                restored, snapshot_fault = await self._checkpointer.restore(sid, record.head)
            # The surface events' rows, as read: the rows cache of the session's next snapshot.
            rows = self._checkpointer.rows_cache(restored)
            if restored is not None:
                loader = await load_after(self.backend, self.types, sid, restored, rows)
            else:
                loader, _ = await load_log(self.backend, self.types, sid, salvage=False, rows=rows)
            fault = head_fault(sid, loader.head, record.head)
            if fault is not None:
                raise fault
            opened = Opened(snapshot_fault=snapshot_fault)
            if restored is not None:
                states = await self._checkpointer.states_at(sid, restored, partial(self.read, sid))
                opened = Opened(snapshot_seq=restored.seq, states=states)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.backend.release_lease(sid, self._owner)
            raise
        return self._wrap(
            sid, loader, record, writable=True, opened=opened, rows=rows, whole=keep_whole
        )

    async def _take_lease(self, sid: str, wait: float) -> None:
        """Take the writer lease, waiting up to ``wait`` seconds for its holder to let go."""
        deadline = anyio.current_time() + wait
        while True:
            try:
                if sid in self._open:
                    raise SessionBusyError(
                        f"session {sid!r} is already open for writing in this store",
                        session_id=sid,
                        hint="close the other Session object first",
                    )
                await self.backend.acquire_lease(sid, self._owner)
                return
            except SessionBusyError:
                self._note_lease_refused()
                remaining = deadline - anyio.current_time()
                if remaining <= 0:
                    raise
                # A lease ends without any event this store could wait on (another process
                # closes, or its lease expires on a server's clock): look again shortly.
                await anyio.sleep(min(_LEASE_POLL, remaining))

    def _wrap(
        self,
        sid: str,
        loaded: LogLoader,
        record: SessionRecord,
        *,
        writable: bool,
        opened: Opened | None = None,
        rows: dict[int, Row] | None = None,
        whole: bool = False,
    ) -> Session:
        """The session over ``loaded``, wired to this store once; ``whole``: it was asked to
        hold its whole log (``keep_whole=True``), so snapshots never drop its events."""
        head = loaded.head
        ports = SessionPorts(
            tail=self._writer.tail(sid, loaded.last_hash, head) if writable else None,
            stored=partial(self.read, sid),
            release=self._release if writable else None,
            checkpoint=self._checkpointer.schedule(sid, head, rows, whole=whole)
            if writable
            else None,
            max_event_bytes=self.max_event_bytes,
            max_nesting=self.max_nesting,
        )
        session = Session(
            id=sid,
            types=self.types,
            log=loaded,
            metadata=record.metadata,
            ports=ports,
            opened=opened or Opened(),
        )
        if writable:
            self._open[sid] = session
        return session

    async def _release(self, session: Session) -> None:
        if self._open.get(session.id) is session:
            del self._open[session.id]
        session.close_unflushed()
        self._checkpointer.release(session.id)
        if self._backend_open:
            await self.backend.release_lease(session.id, self._owner)

    async def put_attachment(self, data: bytes | bytearray | memoryview) -> str:
        self._check_open()
        digest, stored = attachment_bytes(data)
        await self.backend.put_attachment(digest, stored)
        return digest

    async def get_attachment(self, digest: str) -> bytes:
        self._check_open()
        return await checked_attachment(self.backend, digest)

    async def load_attachments(self, messages: Iterable[Message]) -> dict[str, bytes]:
        self._check_open()
        digests = attached_digests(messages)
        return {digest: await checked_attachment(self.backend, digest) for digest in digests}

    async def verify_attachments(self, session_id: str) -> int:
        self._check_open()
        sid, backend = validate_session_id(session_id), self.backend
        return await settled(backend, sid, lambda: verify_session(backend, self.types, sid))

    async def verify_snapshot(self, session_id: str) -> int | None:
        self._check_open()
        sid = validate_session_id(session_id)
        return await settled(self.backend, sid, lambda: verify_snapshot(self, sid))

    async def list(self, after: str | None = None, limit: int = 100) -> list[SessionInfo]:
        self._check_open()
        if not check_int(limit, 1):
            raise ValidationError(
                f"list limit must be at least 1 (an int up to 2**63 - 1), got {limit!r}"
            )
        if after is not None and not check_text(after):
            raise ValidationError(f"list after must be a session id string or None, got {after!r}")
        return await self.backend.list_sessions(after, limit)

    async def read(
        self, session_id: str, from_seq: int = 0, limit: int | None = None
    ) -> AsyncIterator[Event]:
        self._check_open()
        sid = validate_session_id(session_id)
        if not check_int(from_seq, INT64_MIN):
            raise ValidationError(f"read from_seq must be an int (a seq), got {from_seq!r}")
        if limit is not None and not check_int(limit, 0):
            raise ValidationError(f"read limit must be None or an int >= 0, got {limit!r}")
        await self.backend.get_session(sid)
        async for chunk in self.backend.read_rows(sid, max(0, from_seq), limit):
            for row in chunk:
                yield decoded(row, self.types, sid)

    async def follow(self, session_id: str, after: int = -1) -> AsyncIterator[Event]:
        self._check_open()
        sid = validate_session_id(session_id)
        if not check_int(after, -1, INT64_MAX - 1):
            raise ValidationError(f"follow after must be an int >= -1 (a seq), got {after!r}")
        decode = partial(decoded, types=self.types, sid=sid)
        async for event in follow_events(self.backend, sid, after, decode):
            yield event

    async def fork(self, session_id: str, boundary: int, *, child_id: str | None = None) -> Session:
        self._check_open()
        return await self.open(
            await fork_log(self.backend, self.types, session_id, boundary, child_id)
        )

    async def delete(self, session_id: str, *, force: bool = False) -> None:
        self._check_open()
        sid = validate_session_id(session_id)
        if not isinstance(force, bool):
            raise ValidationError(f"force must be True or False, got {force!r}", session_id=sid)
        if sid in self._open:
            raise SessionBusyError(
                f"session {sid!r} is open for writing in this store; close it before deleting",
                session_id=sid,
            )
        await self.backend.delete_session(sid, self._owner, force=force)
