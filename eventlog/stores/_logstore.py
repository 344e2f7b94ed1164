"""The one :class:`Store` implementation, over any :class:`Backend`.

Decoding, hash-chain verification, surface rebuild, leases and the writer live here once, so
every backend gets the same semantics and the conformance suite tests them all alike.
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Sequence
from functools import partial
from types import TracebackType
from typing import Any

import anyio
import msgspec
from anyio.abc import TaskGroup

from .._attachments import attached_digests, attachment_bytes, checked_attachment, verify_session
from .._codec import (
    GENESIS_HASH,
    Row,
    decode_event,
    encode_payload,
    make_row,
    rechain,
    verify_rows,
)
from .._errors import (
    ClosedError,
    CorruptLogError,
    EventLogError,
    SessionBusyError,
    ValidationError,
)
from .._event import Event
from .._ids import new_session_id, validate_session_id
from .._message import Message
from .._registry import EventTypes
from .._session import DEFAULT_MAX_EVENT_BYTES, Session
from .._snapshot_state import snapshot_states
from .._strict import (
    DEFAULT_MAX_NESTING,
    INT64_MAX,
    INT64_MIN,
    MAX_NESTING_CEILING,
    check_int,
    check_number,
    check_text,
    find_invalid,
    on_fresh_stack,
)
from .._vocabulary import SessionForked
from ._base import (
    Backend,
    BackgroundTask,
    SessionInfo,
    SessionRecord,
    Snapshots,
    Store,
)
from ._batch import Batch, StartWrite, WriteDone
from ._loader import LogLoader
from ._owners import new_owner, retire_owner
from ._salvage import follow_events, head_fault, open_salvaged, settled
from ._snapshot_check import usable_snapshot, verify_snapshot
from ._snapshots import Restored, encode_snapshot, keep_surface_rows
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


class LogStore(Store):
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
        is closed. Sessions opened with ``verify="full"`` never drop any.
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
        self.snapshot_every = snapshot_every if isinstance(backend, Snapshots) else 0
        self.trim_every = trim_every
        # Snapshot writes in flight (closing waits for them: each is a few milliseconds).
        self._snapshot_writes: set[str] = set()
        self._snapshots_idle = anyio.Event()
        # Per open session: the rows of its last snapshot and of the surface events written
        # since, reused by the next (see encode_snapshot); dropped when it is released.
        self._snapshot_rows: dict[Session, dict[int, Row]] = {}
        self._writer = Writer(
            self._write_keeping_rows if self.snapshot_every else backend.write,
            start=self._start_write(),
            pipeline=backend.abilities.pipeline,
            write_delay=write_delay,
            max_pending_bytes=max_pending_bytes,
        )
        self._owner = lease_owner()
        self._open: dict[str, Session] = {}
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
                if self._snapshot_writes:
                    with anyio.move_on_after(5.0):
                        await self._snapshots_idle.wait()
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

    # -- sessions ------------------------------------------------------------------------------

    async def create(
        self, session_id: str | None = None, metadata: dict[str, Any] | None = None
    ) -> Session:
        self._check_open()
        sid = validate_session_id(session_id) if session_id is not None else new_session_id()
        record = SessionRecord(
            id=sid,
            created_at=time.time_ns() // 1_000_000,
            metadata=_metadata(metadata, self.max_nesting),
        )
        await self.backend.create_session(record)
        await self.backend.acquire_lease(sid, self._owner)
        return self._wrap(sid, LogLoader(self.types, sid), record, read_only=False)

    async def open(
        self,
        session_id: str,
        *,
        salvage: bool = False,
        wait: float = 0.0,
        verify: str = "snapshot",
    ) -> Session:
        self._check_open()
        sid = validate_session_id(session_id)
        wait = _seconds(wait, sid)
        if type(salvage) is not bool:
            raise ValidationError(f"salvage must be True or False, got {salvage!r}")
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
            if verify == "snapshot" and isinstance(self.backend, Snapshots):
                restored, snapshot_fault = await usable_snapshot(
                    self.backend, self.types, sid, record.head
                )
            # The surface events' rows, as read: the rows cache of the session's next snapshot.
            rows: dict[int, Row] | None = {} if self.snapshot_every else None
            if restored is not None:
                loader = await self._load_after(sid, restored, rows)
            else:
                loader, _ = await self._load(sid, salvage=False, rows=rows)
            fault = head_fault(sid, loader.head, record.head)
            if fault is not None:
                raise fault
            states = {} if restored is None else await self._states_of(sid, restored)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.backend.release_lease(sid, self._owner)
            raise
        session = self._wrap(sid, loader, record, read_only=False, whole=verify == "full")
        session.snapshot_fault = snapshot_fault
        if rows is not None:
            self._snapshot_rows[session] = rows
        if restored is not None:
            session.snapshot_seq = restored.seq
            for key, state in states.items():
                session.projection_cache[key] = [state, restored.seq + 1]
        return session

    async def _load_after(
        self, sid: str, restored: Restored, rows: dict[int, Row] | None = None
    ) -> LogLoader:
        """A loader resumed from ``restored`` and fed the stored rows after it; ``rows``, when
        given, gets the snapshot's rows and the surface rows read after it."""
        if rows is not None:
            rows.update(restored.rows)
        loader = LogLoader(self.types, sid)
        loader.resume(
            head=restored.head,
            last_hash=restored.hash,
            surface=restored.surface,
            grammar=restored.grammar,
            pinned=restored.pinned,
        )
        async for chunk in self.backend.read_rows(sid, restored.seq + 1, None):
            loader.feed(chunk)
            if rows is not None:
                keep_surface_rows(rows, chunk, loader.surface)
        return loader

    async def _states_of(self, sid: str, restored: Restored) -> dict[str, object]:
        """The registered projection states at the snapshot's seq: the snapshot's, and for
        each it lacks (absent, another version, undecodable) a fold over the stored events up
        to it, read in chunks (O(log) time, O(state) memory)."""
        states = dict(restored.states)
        missing = [spec for spec in snapshot_states() if spec.key not in states]
        if not missing:
            return states
        logger.info(
            "eventlog: session %r: state(s) %s not in the snapshot: rebuilt from events 0..%d",
            sid,
            ", ".join(spec.key for spec in missing),
            restored.seq,
        )
        folded = {spec.key: spec.initial() for spec in missing}
        async for event in self.read(sid, 0, restored.seq + 1):
            for spec in missing:
                folded[spec.key] = spec.apply(folded[spec.key], event)
        states.update(folded)
        return states

    def _checkpoint(self, session: Session) -> None:
        """Capture a snapshot of ``session`` now (everything durable) and write it in the
        background; a failed write is logged and ignored (the log is the truth)."""
        if session.id in self._snapshot_writes or self._task_group is None:
            return  # one in flight already: the next checkpoint writes a newer one
        seq, digest, data = encode_snapshot(session, self._snapshot_rows.setdefault(session, {}))
        if not self._snapshot_writes:
            self._snapshots_idle = anyio.Event()
        self._snapshot_writes.add(session.id)
        self._task_group.start_soon(self._write_snapshot, session.id, seq, digest, data)

    async def _write_keeping_rows(self, batches: Sequence[Batch]) -> Collection[str]:
        """The backend's write; then the surface rows of each session that may snapshot (it
        has compacted) are kept for its next snapshot, which so encodes no payload twice."""
        conflicts = await self.backend.write(batches)
        self._keep_rows(batches, conflicts)
        return conflicts

    def _start_write(self) -> StartWrite:
        """The backend's :meth:`~Backend.start_write` for the writer's pipelined rounds,
        keeping the written rows as :meth:`_write_keeping_rows` does."""
        backend = self.backend
        if not self.snapshot_every:
            return backend.start_write

        def start(batches: Sequence[Batch], done: WriteDone) -> None:
            def written(conflicts: Collection[str], error: BaseException | None) -> None:
                if error is None:
                    self._keep_rows(batches, conflicts)
                done(conflicts, error)

            backend.start_write(batches, written)

        return start

    def _keep_rows(self, batches: Sequence[Batch], conflicts: Collection[str]) -> None:
        try:
            for batch in batches:
                session = self._open.get(batch.session_id)
                if session is None or not session.surface_index.generation:
                    continue  # not open here (closed meanwhile), or never compacted: no snapshot
                if conflicts and batch.session_id in conflicts:
                    continue  # not written: fenced
                cache = self._snapshot_rows.setdefault(session, {})
                keep_surface_rows(cache, batch.rows, session.surface_index)
        except Exception:  # only a cache: a round that was written must never look failed
            logger.exception("eventlog: keeping written rows for snapshots failed")

    async def _write_snapshot(self, sid: str, seq: int, digest: bytes, data: bytes) -> None:
        assert isinstance(self.backend, Snapshots)
        try:
            with anyio.CancelScope(shield=True):
                stored = await self.backend.write_snapshot(sid, seq, digest, data)
            if not stored:
                logger.info("eventlog: session %r: snapshot at seq %d not stored", sid, seq)
        except Exception as exc:
            logger.warning(
                "eventlog: session %r: writing the snapshot at seq %d failed: %s", sid, seq, exc
            )
        finally:
            self._snapshot_writes.discard(sid)
            if not self._snapshot_writes:
                self._snapshots_idle.set()

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
        read_only: bool,
        whole: bool = False,
    ) -> Session:
        """The session over ``loaded``; ``whole``: it was asked to hold its whole log (opened
        with ``verify="full"``), so snapshots never drop its events from memory."""
        session = Session(
            id=sid,
            types=self.types,
            tail=None
            if read_only
            else self._writer.tail(sid, loaded.last_hash, loaded.base + len(loaded.events) - 1),
            events=loaded.events,
            last_hash=loaded.last_hash,
            surface=loaded.surface,
            metadata=record.metadata,
            read_only=read_only,
            max_event_bytes=self.max_event_bytes,
            release=None if read_only else self._release,
            max_nesting=self.max_nesting,
            grammar=loaded.grammar,
            base=loaded.base,
            pinned=loaded.pinned,
            stored=partial(self.read, sid),
            checkpoint=None if read_only or not self.snapshot_every else self._checkpoint,
            snapshot_every=self.snapshot_every,
            trim_every=0 if whole else self.trim_every,
        )
        if not read_only:
            self._open[sid] = session
        return session

    async def _release(self, session: Session) -> None:
        if self._open.get(session.id) is session:
            del self._open[session.id]
        session.close_unflushed()
        self._snapshot_rows.pop(session, None)
        if self._backend_open:
            await self.backend.release_lease(session.id, self._owner)

    async def _load(
        self,
        sid: str,
        *,
        salvage: bool,
        limit: int | None = None,
        rows: dict[int, Row] | None = None,
    ) -> tuple[LogLoader, EventLogError | None]:
        """Decode, verify and fold a stored log (see :meth:`Store.open`), at most ``limit``
        events of it; ``rows``, when given, gets the rows of the surface's events once the
        session has compacted (see :func:`keep_surface_rows`: about the surface's size).

        With ``salvage`` the error that stopped loading is returned instead of raised.
        """
        loader = LogLoader(self.types, sid)
        try:
            async for chunk in self.backend.read_rows(sid, 0, limit):
                loader.feed(chunk)
                if rows is not None and loader.surface.generation:
                    keep_surface_rows(rows, chunk, loader.surface)
        except CorruptLogError as exc:
            if not salvage:
                raise
            return loader, exc
        except EventLogError as exc:
            if not salvage or exc.seq is None:
                raise
            return loader, exc
        return loader, None

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
                yield _decode(row, self.types, sid)

    # -- raw access, for export, import and audit tools --------------------------------------

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

    async def follow(self, session_id: str, after: int = -1) -> AsyncIterator[Event]:
        self._check_open()
        sid = validate_session_id(session_id)
        if not check_int(after, -1, INT64_MAX - 1):
            raise ValidationError(f"follow after must be an int >= -1 (a seq), got {after!r}")
        decode = partial(_decode, types=self.types, sid=sid)
        async for event in follow_events(self.backend, sid, after, decode):
            yield event

    async def fork(self, session_id: str, boundary: int, *, child_id: str | None = None) -> Session:
        self._check_open()
        sid = validate_session_id(session_id)
        wanted = None if child_id is None else validate_session_id(child_id)
        if not check_int(boundary, INT64_MIN, INT64_MAX - 1):
            raise ValidationError(
                f"session {sid!r}: fork boundary must be an int (a seq), got {boundary!r}",
                session_id=sid,
            )
        record = await self.backend.get_session(sid)
        rows: list[Row] = []
        async for chunk in self.backend.read_rows(sid, 0, boundary + 1 if boundary >= 0 else 0):
            rows.extend(chunk)
        if not 0 <= boundary < len(rows) or boundary > record.head:
            raise ValidationError(
                f"session {sid!r}: fork boundary {boundary} is outside the stored log "
                f"(0..{record.head})",
                session_id=sid,
                seq=boundary,
            )
        verify_rows(rows, GENESIS_HASH, 0, session_id=sid)
        open_turn = _open_turn_at(rows)
        if open_turn is not None:
            raise ValidationError(
                f"session {sid!r}: fork boundary {boundary} is inside turn {open_turn}, "
                "which is still open there",
                session_id=sid,
                seq=boundary,
                hint="fork at the turn/end of a turn, or before its turn/start",
            )
        child_id = wanted if wanted is not None else new_session_id()
        info = self.types.get("session/forked")
        assert info is not None
        forked_data = SessionForked(parent=sid, boundary=boundary)
        _, raw = encode_payload(info, forked_data, session_id=child_id, seq=boundary + 1)
        # One reading of the clock for the child's creation and its ``session/forked``: a
        # second reading for either could fall on an earlier millisecond than the other, and
        # the marker would predate the session it opens. A parent whose last event is later
        # still (another writer's clock ahead of ours) keeps the log's times non-decreasing.
        created = time.time_ns() // 1_000_000
        stamp = max(created, rows[-1].time)
        # The child's chain is its own (format 2, bound to its id), whatever the parent's.
        rows = rechain(rows, child_id)
        forked = make_row(
            rows[-1].hash, boundary + 1, "session/forked", stamp, None, (), False, raw, child_id
        )
        child = SessionRecord(
            id=child_id,
            created_at=created,
            parent_id=sid,
            fork_seq=boundary,
            metadata=dict(record.metadata),
            head=boundary + 1,
        )
        await self.backend.create_session(child, [*rows, forked])
        return await self.open(child_id)

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

    # -- for test and fault tools: what they need of the backend, without reaching into it ------

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
        event size and nesting limits, ``trim_every``, url) over ``wrap(backend)``: how a
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
            "url": self.url,
        }


def _seconds(wait: object, sid: str) -> float:
    """``open``'s ``wait``, checked.

    :raises ValidationError: not a finite number of seconds >= 0.
    """
    try:
        if isinstance(wait, int | float) and not isinstance(wait, bool):
            seconds = float(wait)
            if 0 <= seconds < math.inf:
                return seconds
    except OverflowError:
        pass
    raise ValidationError(f"wait must be a number of seconds >= 0, got {wait!r}", session_id=sid)


def _open_turn_at(rows: Sequence[Row]) -> int | None:
    """The number of the turn still open after ``rows``, or ``None``."""
    open_turn: int | None = None
    for row in rows:
        if row.type == "turn/start":
            open_turn = int(msgspec.json.decode(row.data).get("turn", 0))
        elif row.type == "turn/end":
            open_turn = None
    return open_turn


def _decode(row: Row, types: EventTypes, sid: str) -> Event:
    try:
        return decode_event(row, types, session_id=sid)
    except RecursionError:  # a deep caller stack, not a deep payload: redo with a fresh one
        return on_fresh_stack(partial(decode_event, session_id=sid), row, types)


def _metadata(metadata: dict[str, Any] | None, max_nesting: int) -> dict[str, Any]:
    """A JSON copy of ``metadata``, held to the rules of payloads (see :mod:`eventlog._strict`).

    :raises ValidationError: not a dict of JSON values, naming the path of the first bad one.
    """
    if metadata is None:
        return {}
    if type(metadata) is not dict:
        raise ValidationError(f"metadata must be a dict, got {type(metadata).__name__}")
    why = find_invalid(metadata, max_nesting=max_nesting)
    if why is not None:
        raise ValidationError(f"metadata is not valid: {why}")
    try:
        return dict(msgspec.json.decode(msgspec.json.encode(metadata)))
    except RecursionError:
        return dict(on_fresh_stack(lambda: msgspec.json.decode(msgspec.json.encode(metadata))))
    except (TypeError, ValueError, msgspec.MsgspecError) as exc:
        raise ValidationError(f"metadata is not JSON-serialisable: {exc}") from exc
