"""A session: one append-only log, its commit barrier and its flush barrier.

``append`` is synchronous and does no I/O: it validates, stamps, stores the frozen event, hands
the row to the store's write queue and tells observers. ``flush`` waits until everything
committed before it is durable.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from time import time_ns as _time_ns
from typing import Any, Protocol, TypeGuard, overload

import anyio

from ._errors import (
    ClosedError,
    EventLogError,
    EventNotLoadedError,
    ReentrancyError,
    ValidationError,
)
from ._event import Append, Event, Replace, SurfaceOp
from ._grammar import TurnGrammar
from ._prefix import EventsView
from ._registry import EventTypes
from ._snapshot_state import snapshot_states
from ._staging import encode_for_append
from ._strict import DEFAULT_MAX_NESTING, INT64_MAX
from ._surface import SurfaceIndex, message_delta, plan_transition

__all__ = (
    "EventsView",
    "Observer",
    "Session",
    "SessionTail",
    "DEFAULT_MAX_EVENT_BYTES",
    "StoredEvents",
)

logger = logging.getLogger("eventlog.session")

Observer = Callable[[Event], None]

#: Default ceiling of one event's encoded payload.
DEFAULT_MAX_EVENT_BYTES = 8 * 1024 * 1024

#: ``read(from_seq, limit)``: the stored events of this session from ``from_seq``, at most
#: ``limit`` (the store's ``read``); how a session opened from a snapshot reaches older events.
StoredEvents = Callable[[int, int], AsyncIterator[Event]]
#: Called by ``flush`` once everything is durable and a snapshot checkpoint is due.
_Checkpoint = Callable[["Session"], None]
#: No checkpoint due (snapshots off).
_NEVER = 2**63


def _fold_grammar(events: Sequence[Event]) -> TurnGrammar:
    grammar = TurnGrammar()
    for event in events:
        grammar.advance(event.type, event.data)
    return grammar


class SessionTail(Protocol):
    """The write side of one writable session, owned by its store's writer.

    The session reads its watermarks here and hands it what it commits; only the writer
    changes them (a durable seq only grows; a fault, once set, stays).
    """

    @property
    def durable(self) -> int:
        """The last seq known durable in the store."""
        ...

    @property
    def last_hash(self) -> bytes:
        """The chain hash of the last event turned into a row."""
        ...

    @property
    def fault(self) -> EventLogError | None:
        """The error that fenced the session, or ``None``."""
        ...

    def check_room(self, seq: int, nbytes: int) -> None:
        """Refuse (raise) a commit of ``nbytes`` at ``seq`` that the store cannot take now."""
        ...

    def enqueue(self, event: Event, data: bytes) -> None:
        """Queue a committed event and its payload bytes for writing."""
        ...

    async def flush(self, target: int) -> None:
        """Return once ``target`` is durable (see :meth:`Session.flush` for what it raises)."""
        ...

    def forget(self) -> None:
        """Drop the events not yet written (the session closes without them)."""
        ...


class _StoredTail:
    """The tail of a session opened read-only: everything loaded is durable, nothing is
    written."""

    __slots__ = ("durable", "fault", "last_hash")

    def __init__(self, durable: int, last_hash: bytes) -> None:
        self.durable = durable
        self.last_hash = last_hash
        self.fault: EventLogError | None = None

    def check_room(self, seq: int, nbytes: int) -> None:
        raise ClosedError("a read-only session takes no commits")

    def enqueue(self, event: Event, data: bytes) -> None:
        raise ClosedError("a read-only session takes no commits")

    async def flush(self, target: int) -> None:
        return None

    def forget(self) -> None:
        return None


class _PartialEvents(Sequence[Event]):
    """The events from ``start`` to ``stop - 1`` of a session opened from (or trimmed at) a
    snapshot, some of which are not in memory: indexing a held one (the surface's, and every
    event since the snapshot) works; any other raises :class:`EventNotLoadedError`, and so
    does iterating past one. Later appends do not show through."""

    __slots__ = ("_base", "_events", "_pinned", "_session_id", "_start", "_stop")

    def __init__(
        self,
        events: list[Event],
        base: int,
        pinned: Mapping[int, Event],
        session_id: str,
        start: int,
        stop: int,
    ) -> None:
        self._events, self._base, self._pinned = events, base, pinned
        self._session_id = session_id
        self._start, self._stop = start, max(start, stop)

    def __len__(self) -> int:
        return self._stop - self._start

    def _at(self, seq: int) -> Event:
        if seq >= self._base:
            return self._events[seq - self._base]
        event = self._pinned.get(seq)
        if event is None:
            raise _not_loaded(self._session_id, seq, self._base)
        return event

    @overload
    def __getitem__(self, index: int) -> Event: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Event]: ...
    def __getitem__(self, index: int | slice) -> Event | Sequence[Event]:
        if isinstance(index, slice):
            return [self._at(self._start + i) for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("event index out of range")
        return self._at(self._start + index)

    def __iter__(self) -> Iterator[Event]:
        for seq in range(self._start, self._stop):
            yield self._at(seq)

    def __repr__(self) -> str:
        return f"_PartialEvents(seq {self._start}..{self._stop - 1}, in memory from {self._base})"


def _is_cursor(entry: object) -> TypeGuard[list[Any]]:
    """Whether a ``projection_cache`` entry is a ``[state, next_seq]`` cursor (``catch_up``'s)."""
    return isinstance(entry, list) and len(entry) == 2 and type(entry[1]) is int


def _not_loaded(session_id: str, seq: int, base: int) -> EventNotLoadedError:
    return EventNotLoadedError(
        f"session {session_id!r}, seq {seq}: not in memory (the session was opened from, or "
        f"trimmed at, a snapshot; it holds the surface's events and every event from seq "
        f"{base})",
        session_id=session_id,
        seq=seq,
        hint="read older events with `async for e in session.read_events(from_seq)`, or open "
        'the session with verify="full"',
    )


class Session:
    """One session's log. Get one from ``store.create()`` or ``store.open()``.

    :ivar id: the session id.
    :ivar metadata: the metadata given at creation.
    :ivar projection_cache: per-session cache where projections keep ``(state, next_seq)``
        (docs/architecture.md); owned by the projections layer. A ``[state, next_seq]``
        cursor there keeps the events from ``next_seq`` in memory until it is caught up (see
        :attr:`trims`).
    """

    def __init__(
        self,
        *,
        id: str,
        types: EventTypes,
        tail: SessionTail | None,
        events: list[Event] | None = None,
        last_hash: bytes = b"",
        surface: SurfaceIndex | None = None,
        metadata: dict[str, Any] | None = None,
        read_only: bool = False,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        release: Callable[[Session], Any] | None = None,
        max_nesting: int = DEFAULT_MAX_NESTING,
        grammar: TurnGrammar | None = None,
        base: int = 0,
        pinned: Mapping[int, Event] | None = None,
        stored: StoredEvents | None = None,
        checkpoint: _Checkpoint | None = None,
        snapshot_every: int = 0,
        trim_every: int = 0,
    ) -> None:
        self.id = id
        self.types = types
        # The registry's own dict, read on every append (a method call costs as much as the
        # lookup); registering later adds to this same dict.
        self._type_infos = types._types
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.read_only = read_only or tail is None
        self.max_event_bytes = max_event_bytes
        self.max_nesting = max_nesting
        self.projection_cache: dict[object, Any] = {}
        #: Opened with ``salvage=True``: the error that stopped loading (naming its seq), or
        #: ``None`` when the whole stored log loaded.
        self.salvage_fault: EventLogError | None = None
        #: Why the latest stored snapshot was not used on open (it did not match the chain,
        #: did not decode, or is of an unknown format), or ``None``; the session was then
        #: loaded by a longer replay (docs/stores.md).
        self.snapshot_fault: str | None = None
        #: The seq of the snapshot this session was opened from, or ``None`` (a full replay).
        self.snapshot_seq: int | None = None
        self._events: list[Event] = events if events is not None else []
        # Opened from a snapshot at seq ``_base``: ``_events`` holds seqs ``_base..head``,
        # ``_pinned`` the older events still on the surface. A full load: 0 and empty.
        self._base = base
        self._pinned: Mapping[int, Event] = pinned if pinned is not None else {}
        self._stored = stored
        self._checkpoint = checkpoint
        self._snapshot_every = snapshot_every
        # A snapshot taken while the session is open drops the events it covers from memory
        # once this many have gathered (see _trim_to); 0: never (a session asked to hold its
        # whole log, or a store with trimming off).
        self._trim_every = trim_every if checkpoint is not None else 0
        # The head at which the next snapshot is due (after a replace: at once).
        head = base + len(self._events) - 1
        self._next_snapshot = head + snapshot_every if checkpoint and snapshot_every else _NEVER
        # Durable seq, chain hash and fence live in the tail, owned by the store's writer.
        self._tail: SessionTail = (
            tail if tail is not None and not read_only else _StoredTail(head, last_hash)
        )
        self._surface = surface if surface is not None else SurfaceIndex()
        self._grammar = grammar if grammar is not None else _fold_grammar(self._events)
        self._observers: list[Observer] = []
        self._notifying = False
        self._closed = False
        # True whenever append must refuse (notifying, closed, read-only): one check on the hot
        # path, beside the tail's fault; _check_writable says why.
        self._blocked = self.read_only
        self._release = release

    # -- watermarks ----------------------------------------------------------------------------

    @property
    def head(self) -> int:
        """The last committed seq (-1 when empty)."""
        return self._base + len(self._events) - 1

    @property
    def loaded_from(self) -> int:
        """The first seq held in memory with every later one: 0 for a full load, else the seq
        of the snapshot the session was opened from or, later, of the latest snapshot taken
        while it is open (see :attr:`trims`); older events are read with :meth:`read_events`.
        It only grows, until :meth:`load_history` sets it to 0."""
        return self._base

    @property
    def trims(self) -> bool:
        """Whether a snapshot taken while the session is open also drops from memory the
        events it covers that are not on the surface (once the store's ``trim_every`` of them
        have gathered), as if the session had been reopened from it (docs/stores.md, "A
        long-lived session"). True for a writable session of a store with snapshots and
        ``trim_every`` above 0 (the default), unless it was opened with ``verify="full"`` or
        made whole with :meth:`load_history`: those asked to hold their whole log, and do for
        as long as they are open."""
        return self._trim_every > 0

    @property
    def durable(self) -> int:
        """The last seq known durable in the store (``durable <= head``)."""
        return self._tail.durable

    @property
    def surface_index(self) -> SurfaceIndex:
        """The live surface index (read it through ``projections.surface``)."""
        return self._surface

    @property
    def fenced(self) -> bool:
        """True once the session can no longer write: another writer advanced the stored log
        or took the lease (``ConflictError``), or an event could not be stored
        (``StoreWriteError``)."""
        return self._tail.fault is not None

    # -- commit --------------------------------------------------------------------------------

    def append(
        self,
        type: str,
        data: Any,
        *,
        surface: SurfaceOp | None = None,
        sources: Sequence[int] = (),
        time: int | None = None,
    ) -> Event:
        """Commit one event and return it.

        Validation order: payload against its registered type (strictly: see
        :func:`eventlog.codec.encode_payload`); envelope (a surface operation exactly on surface
        types, ``sources`` unique and all ``< seq``); the surface transition; ``time``; the
        structural rules of turns and steps (``turn/start`` opens the next turn only when none
        is open, steps open and close inside it in order, messages carry their event's role);
        the write backlog. Only then is the event stored, queued and shown to observers. Any
        failure leaves the session exactly as it was.

        :param time: epoch milliseconds; defaults to now (never earlier than the last event).
        :raises UnknownEventTypeError: ``type`` is not registered.
        :raises ValidationError: the payload or envelope is invalid, the event is too large, or
            it breaks the turn and step structure (the message names the open turn and step).
        :raises SurfaceError: the surface operation is not allowed.
        :raises BacklogFullError: too many bytes wait to be written.
        :raises ReentrancyError: called from inside an observer of this session.
        :raises ConflictError: the session is fenced.
        :raises ClosedError: the session is closed or read-only.
        """
        tail = self._tail
        if self._blocked or tail.fault is not None:
            self._check_writable()
        seq = self._base + len(self._events)
        info, payload, raw = encode_for_append(
            self._type_infos.get(type) if isinstance(type, str) else None,
            type,
            data,
            session_id=self.id,
            seq=seq,
            max_nesting=self.max_nesting,
            max_event_bytes=self.max_event_bytes,
        )
        if not sources and (isinstance(surface, Append) if info.surface else surface is None):
            sources_tuple: tuple[int, ...] = ()  # the common, valid case: nothing to check
        else:
            sources_tuple = self._check_envelope(seq, type, info.surface, surface, sources)
        transition = None
        append_delta: int | None = None
        if isinstance(surface, Append):
            # The common case, O(1) and with nothing to refuse: skip the general planner.
            append_delta = message_delta(payload.message)
        elif surface is not None:
            transition = plan_transition(
                self._surface,
                seq=seq,
                type_=type,
                data=payload,
                op=surface,
                sources=sources_tuple,
                session_id=self.id,
                payload_of=self._payload_of,
            )
        if time is None:
            stamp = _time_ns() // 1_000_000
            if seq and stamp < self._events[-1].time:
                stamp = self._events[-1].time  # never earlier than the event before
        else:
            stamp = self._given_time(seq, time)
        misfit = self._grammar.check(type, payload)
        if misfit is not None:
            raise ValidationError(
                f"session {self.id!r}, seq {seq}: {misfit}",
                session_id=self.id,
                seq=seq,
                hint="turns count from 1, steps from 1 in each turn; each closes before the "
                "next opens",
            )
        tail.check_room(seq, len(raw))
        # -- commit point: nothing below may fail --
        event = Event(
            seq=seq,
            type=type,
            time=stamp,
            data=payload,
            surface=surface,
            sources=sources_tuple,
            ignorable=info.ignorable,
        )
        self._events.append(event)
        self._grammar.advance(type, payload)
        if append_delta is not None:
            self._surface.append_node(seq, append_delta)
        elif transition is not None:
            self._surface.apply(transition)
            if self._checkpoint is not None and transition.last >= transition.first:
                self._next_snapshot = seq  # a replace (compaction): snapshot at the next flush
        tail.enqueue(event, raw)
        if self._observers:
            self._notify(event)
        return event

    def _check_writable(self) -> None:
        if self._notifying:
            raise ReentrancyError(
                f"session {self.id!r}: append called from inside an observer",
                session_id=self.id,
                seq=self.head + 1,
                hint="schedule the append after the observer returns",
            )
        self.raise_if_fenced()
        if self._closed:
            raise ClosedError(f"session {self.id!r} is closed", session_id=self.id)
        if self.read_only:
            raise ClosedError(
                f"session {self.id!r} is read-only (opened for reading or with salvage=True)",
                session_id=self.id,
            )

    def _check_envelope(
        self,
        seq: int,
        type_: str,
        is_surface_type: bool,
        surface: SurfaceOp | None,
        sources: Sequence[int],
    ) -> tuple[int, ...]:
        where = f"session {self.id!r}, seq {seq}, type {type_!r}"
        if surface is not None and not isinstance(surface, Append | Replace):
            raise ValidationError(
                f"{where}: surface must be APPEND, Replace(start, end) or None, got {surface!r}",
                session_id=self.id,
                seq=seq,
            )
        if isinstance(surface, Replace) and not (
            type(surface.start) is int and type(surface.end) is int
        ):
            # A bool would pass as a seq here and be stored as 'replace:False:False'.
            raise ValidationError(
                f"{where}: Replace start and end must be ints (seqs), got {surface!r}",
                session_id=self.id,
                seq=seq,
            )
        if is_surface_type and surface is None:
            raise ValidationError(
                f"{where}: a surface type needs a surface operation (APPEND or Replace)",
                session_id=self.id,
                seq=seq,
            )
        if not is_surface_type and surface is not None:
            raise ValidationError(
                f"{where}: only user/message, assistant/message and tool/result take a "
                "surface operation",
                session_id=self.id,
                seq=seq,
            )
        if not sources:
            return ()
        try:
            result = tuple(sources)
        except TypeError:
            raise ValidationError(
                f"{where}: sources must be a sequence of seqs, got {type(sources).__name__}",
                session_id=self.id,
                seq=seq,
            ) from None
        for source in result:
            if type(source) is not int or not 0 <= source < seq:
                raise ValidationError(
                    f"{where}: source {source!r} is not the seq of an earlier event (0..{seq - 1})",
                    session_id=self.id,
                    seq=seq,
                )
        if len(set(result)) != len(result):
            raise ValidationError(
                f"{where}: sources {list(result)} name the same event twice",
                session_id=self.id,
                seq=seq,
            )
        return result

    def _given_time(self, seq: int, time: object) -> int:
        """An explicitly given time, checked."""
        if type(time) is not int or not 0 <= time <= INT64_MAX:
            raise ValidationError(
                f"session {self.id!r}, seq {seq}: time {time!r} is not epoch milliseconds "
                "(an int from 0 to 2**63 - 1)",
                session_id=self.id,
                seq=seq,
            )
        return time

    @property
    def grammar(self) -> TurnGrammar:
        """Where the log stands structurally (open turn and step); read-only for callers."""
        return self._grammar

    def _payload_of(self, seq: int) -> Any:
        return self.event(seq).data

    def _notify(self, event: Event) -> None:
        self._notifying = True
        self._blocked = True
        try:
            for observer in tuple(self._observers):
                try:
                    observer(event)
                except Exception:
                    # Contained: an observer never undoes or blocks a commit.
                    logger.exception(
                        "eventlog: observer %r failed on session %r seq %d",
                        observer,
                        self.id,
                        event.seq,
                    )
        finally:
            self._notifying = False
            self._blocked = self.read_only or self._closed

    # -- flush and lifecycle -------------------------------------------------------------------

    async def flush(self) -> None:
        """Return when every event committed before this call is durable.

        Concurrent callers share one write round (group commit).

        :raises StoreWriteError: the write failed; the events stay queued for the next flush.
        :raises ConflictError: another writer advanced the stored log (the session is fenced).
        :raises ClosedError: the session (or its store) was closed.
        """
        if self._closed:
            raise ClosedError(f"session {self.id!r} is closed", session_id=self.id)
        head = self._base + len(self._events) - 1  # self.head, inline: once per flush
        if self.read_only or self._tail.durable >= head:
            self.raise_if_fenced()
            return
        await self._tail.flush(head)
        head = self._base + len(self._events) - 1  # again: appends may have come meanwhile
        if head >= self._next_snapshot and self._tail.durable == head:
            self._take_snapshot()

    def _take_snapshot(self) -> None:
        """Hand the state at ``head`` (all durable) to the store's checkpoint: it captures it
        now and writes it in the background; a failure there is logged, never raised."""
        # At least as many events as the surface has nodes until the next one: a snapshot
        # holds the surface, so this keeps what snapshots write within what the log writes.
        every = self._snapshot_every
        self._next_snapshot = self.head + max(every, len(self._surface)) if every else _NEVER
        surface = len(self._surface)
        if (self._surface.generation == 0 and surface) or 2 * surface > self.head + 1:
            # A session that has never compacted (no surface Replace yet), or whose surface
            # holds more than half its events: its messages are most of its log's bytes, so a
            # snapshot would be a second copy of the log (twice the file), and an open from it
            # would hold both copies at once; a replay reads the log once. Not worth one.
            # A session with an empty surface (an app's own events only: a LangGraph thread)
            # is the opposite case: its snapshot is a few hundred bytes.
            return
        assert self._checkpoint is not None
        try:
            self._checkpoint(self)
        except Exception:
            logger.exception("eventlog: session %r: taking a snapshot failed", self.id)
            return
        if self._trim_every:
            self._trim_to(self.head)

    def _trim_to(self, seq: int) -> None:
        """Hold in memory what an open from a snapshot at ``seq`` would hold: the events from
        ``seq`` on and the older ones still on the surface; drop the rest (they are durable:
        :meth:`read_events` streams them from the store, :meth:`load_history` brings them back).
        Only once at least ``trim_every`` events would go: a session shorter than that keeps
        answering synchronous reads of its old events as it always did (tests, short chats,
        code that folds ``events()`` from 0), and each trim's O(events held) copy is paid
        once per ``trim_every`` events.

        Never past an event a cached projection has not folded yet: the new
        :attr:`loaded_from` is ``seq`` or the lowest ``next_seq`` of the ``[state, next_seq]``
        cursors in :attr:`projection_cache` (``projections.base.catch_up``'s), if lower. A
        cursor already before :attr:`loaded_from` does not hold it back (that projection could
        not catch up from memory before either). A cache entry of another shape must read only
        the surface's events (the messages projection's: its cursor is the surface's
        generation), which stay held. Views handed out before keep the lists they were made
        over (never changed in place: the session moves to new ones), so they stay valid and
        keep those events alive until they are dropped.

        The registered projection states cached as cursors (the snapshot just caught them up)
        are trimmed with them, each by its codec's ``trim`` (:class:`~eventlog.SnapshotState`):
        the state is then what a session opened from a snapshot at its seq holds, as bounded
        as the events are.
        """
        old_base = self._base
        base = seq
        for entry in self.projection_cache.values():
            if _is_cursor(entry) and old_base <= entry[1] < base:
                base = entry[1]
        if base - old_base < self._trim_every:
            return
        events, pinned = self._events, self._pinned
        kept: dict[int, Event] = {}
        for node in self._surface.nodes:  # not in seq order after a replace: look at all
            if node < base:
                kept[node] = events[node - old_base] if node >= old_base else pinned[node]
        # New objects, never a change in place: the views handed out hold the old ones.
        self._events = events[base - old_base :]
        self._pinned = kept
        self._base = base
        self._trim_states()

    def _trim_states(self) -> None:
        cache = self.projection_cache
        for spec in snapshot_states():
            entry = cache.get(spec.key)
            if spec.trim is None or not _is_cursor(entry):
                continue
            try:
                entry[0] = spec.trim(entry[0])
            except Exception:  # the untrimmed state is still right, only larger
                logger.exception("eventlog: session %r: state %r not trimmed", self.id, spec.key)

    async def aclose(self) -> None:
        """Flush, then release the writer lease; further appends raise ``ClosedError``.

        Shielded from cancellation; idempotent. If the flush fails the session stays open
        (nothing is dropped) and the error propagates, so the caller can retry. Closing the
        store closes it regardless: its unwritten events are then discarded and its lease
        released (see ``Store.aclose``).

        :raises StoreWriteError: the final flush failed.
        """
        if self._closed:
            return
        with anyio.CancelScope(shield=True):
            if not self.read_only and not self.fenced:
                await self.flush()
            self._closed = True
            self._blocked = True
            if self._release is not None:
                await self._release(self)

    def close_unflushed(self) -> None:
        """Close without writing (the store closes while its writes fail): the events after
        ``durable`` are dropped from the write queue; appends and flushes raise ``ClosedError``.
        The caller releases the lease."""
        self._closed = True
        self._blocked = True
        self._tail.forget()

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- reading -------------------------------------------------------------------------------

    def events(self, from_seq: int = 0) -> Sequence[Event]:
        """The committed events from ``from_seq`` on, as an immutable view (O(1)), indexed
        from ``from_seq`` (``events()[seq]`` is event ``seq``).

        A session opened from a snapshot, or trimmed at one since (:attr:`trims`), holds in
        memory only the events from :attr:`loaded_from` on and the older ones on the surface:
        for a ``from_seq`` before :attr:`loaded_from` the view reads those it holds and raises
        :class:`~eventlog.EventNotLoadedError` (naming the seq and what to call instead:
        :meth:`read_events`) for any other, also while iterating. A view stays valid (and
        the same) when the session drops events later: it keeps the ones it was made over.

        :raises ValidationError: ``from_seq`` is not an int.
        """
        if type(from_seq) is not int:
            raise ValidationError(
                f"session {self.id!r}: from_seq must be an int (a seq), got {from_seq!r}",
                session_id=self.id,
            )
        start = max(0, from_seq)
        base = self._base
        if start >= base:
            return EventsView(self._events, start - base, len(self._events))
        return _PartialEvents(self._events, base, self._pinned, self.id, start, self.head + 1)

    async def read_events(
        self, from_seq: int = 0, limit: int | None = None
    ) -> AsyncIterator[Event]:
        """Every committed event from ``from_seq`` (at most ``limit``), in seq order: those
        before :attr:`loaded_from` streamed from the store (decoded as ``store.read`` does; the
        chain is checked by ``verify``, not here), the rest from memory. Works on every store
        and whatever the session was opened with; the events up to the head as of the call,
        also when a snapshot drops some of them from memory while the caller iterates.

        :raises ValidationError: ``from_seq`` or ``limit`` is not an int (``limit >= 0``).
        :raises EventNotLoadedError: older events are needed and the session has no store to
            read them from.
        """
        if type(from_seq) is not int or (
            limit is not None and (type(limit) is not int or limit < 0)
        ):
            raise ValidationError(
                f"session {self.id!r}: read_events takes an int from_seq and an int limit >= 0 "
                f"or None, got {from_seq!r}, {limit!r}",
                session_id=self.id,
            )
        seq, stop = max(0, from_seq), self.head + 1
        if limit is not None:
            stop = min(stop, seq + limit)
        while seq < stop:
            # Read where the event is now: a snapshot taken while the caller holds an event
            # (it appends and flushes between two) may drop the next ones from memory.
            base = self._base
            if seq >= base:
                yield self._events[seq - base]
                seq += 1
                continue
            if self._stored is None:
                raise _not_loaded(self.id, seq, base)
            end = min(stop, base)
            async for event in self._stored(seq, end - seq):
                yield event
                seq = event.seq + 1
            if seq < end:
                raise EventNotLoadedError(
                    f"session {self.id!r}, seq {seq}: the store holds no such event",
                    session_id=self.id,
                    seq=seq,
                )

    async def load_history(self) -> None:
        """Read the events before :attr:`loaded_from` from the store and hold them too, as a
        ``verify="full"`` open would have (decoded, not re-verified: ``verify`` checks the
        chain). Afterwards ``loaded_from`` is 0, every synchronous read works, and the
        projections' cached states are dropped (they are rebuilt from the whole log when next
        read: the timeline a snapshot carries knows only the calls still open). From then on
        the session holds its whole log while it is open: no later snapshot drops events
        (:attr:`trims` is False). Views taken before stay as they were. O(log) time and
        memory; nothing to do after a full load.

        :raises EventNotLoadedError: the store no longer holds an event before
            ``loaded_from``.
        """
        # Asked for the whole log: hold it from now on (no snapshot drops events again, also
        # none taken while the older events are read).
        self._trim_every = 0
        base = self._base
        if base == 0:
            return
        older = [event async for event in self.read_events(0, base)]
        if len(older) != base or any(e.seq != i for i, e in enumerate(older)):
            raise EventNotLoadedError(
                f"session {self.id!r}: the store returned {len(older)} of the {base} events "
                "before the snapshot",
                session_id=self.id,
                seq=len(older),
            )
        if self._base == base:  # not loaded meanwhile by another task
            self._events = older + self._events
            self._base = 0
            self._pinned = {}
            self.projection_cache.clear()

    def event(self, seq: int) -> Event:
        """The committed event ``seq`` (O(1), allocates nothing: projections read one new
        event after each commit on their hot path).

        :raises IndexError: ``seq`` is not between 0 and ``head``.
        :raises EventNotLoadedError: ``seq`` is before :attr:`loaded_from` and not on the
            surface (the session was opened from a snapshot; see :meth:`read_events`).
        :raises ValidationError: ``seq`` is not an int.
        """
        if type(seq) is not int:
            raise ValidationError(
                f"session {self.id!r}: seq must be an int, got {seq!r}", session_id=self.id
            )
        if seq < 0:
            raise IndexError(f"session {self.id!r}: seq {seq} is not committed")
        if seq >= self._base:
            return self._events[seq - self._base]
        event = self._pinned.get(seq)
        if event is None:
            raise _not_loaded(self.id, seq, self._base)
        return event

    @property
    def pinned(self) -> Mapping[int, Event]:
        """The events before :attr:`loaded_from` held in memory (those on the surface when
        the session was opened from, or last trimmed at, a snapshot); empty after a full
        load. Read-only."""
        return self._pinned

    def subscribe(self, callback: Observer) -> Callable[[], None]:
        """Call ``callback(event)`` after each commit; returns the function that unsubscribes.

        An observer that raises is logged and ignored; it cannot append to this session.

        :raises ValidationError: ``callback`` is not callable.
        """
        if not callable(callback):
            raise ValidationError(
                f"session {self.id!r}: an observer must be callable, got {callback!r}",
                session_id=self.id,
            )
        self._observers.append(callback)

        def unsubscribe() -> None:
            if callback in self._observers:
                self._observers.remove(callback)

        return unsubscribe

    # -- the write side -------------------------------------------------------------------------

    def raise_if_fenced(self) -> None:
        """Raise (a fresh copy of) the error that fenced the session, if any."""
        fault = self._tail.fault
        if fault is not None:
            raise type(fault)(fault.message, session_id=self.id, seq=fault.seq, hint=fault.hint)

    @property
    def last_hash(self) -> bytes:
        """The chain hash of the last event handed to the store (after ``flush``: the last
        committed event). Hashes are computed by the writer, off the commit path."""
        return self._tail.last_hash

    def __repr__(self) -> str:
        state = " fenced" if self.fenced else " closed" if self._closed else ""
        return f"<Session {self.id!r} head={self.head} durable={self._tail.durable}{state}>"
