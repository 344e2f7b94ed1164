"""A session: one append-only log, its commit barrier and its flush barrier.

``append`` is synchronous and does no I/O: it validates, stamps, stores the frozen event, hands
the row to the store's write queue and tells observers. ``flush`` waits until everything
committed before it is durable. The session holds a window of its events in memory
(:meth:`Session.window`); :meth:`Session.events` reads any range, from the store where it lies
before the window. Snapshots and trimming belong to the store's checkpointer, reached through one
hook (:class:`~eventlog._session_ports.Checkpoint`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from time import time_ns as _time_ns
from typing import Any

import anyio

from ._envelope import check_envelope, given_time
from ._errors import (
    ClosedError,
    EventLogError,
    ReentrancyError,
    ValidationError,
)
from ._event import Append, Event, SurfaceOp
from ._grammar import TurnGrammar
from ._history import SessionHistory
from ._registry import EventTypes
from ._session_ports import LoadedLog, Opened, SessionPorts, SessionTail, StoredTail
from ._staging import encode_for_append
from ._surface import SurfaceIndex, message_delta, plan_transition

# SessionTail is named here too: the writer's docstrings refer to it by this module.
__all__ = ("Observer", "Session", "SessionTail")

logger = logging.getLogger("eventlog.session")

Observer = Callable[[Event], None]

_NO_PORTS: SessionPorts[Session] = SessionPorts()
_NOT_OPENED = Opened()


class Session(SessionHistory):
    """One session's log. Get one from ``store.create()`` or ``store.open()``.

    :ivar id: the session id.
    :ivar metadata: the metadata given at creation.
    :ivar projection_cache: per-session cache where projections keep their state
        (docs/architecture.md); owned by the projections layer. A
        :class:`~eventlog.CachedState` there keeps the events from its ``next_seq`` in memory
        until it is caught up (see :attr:`trims`).
    """

    def __init__(
        self,
        *,
        id: str,
        types: EventTypes,
        log: LoadedLog | None = None,
        metadata: dict[str, Any] | None = None,
        ports: SessionPorts[Session] = _NO_PORTS,
        opened: Opened = _NOT_OPENED,
    ) -> None:
        """Built by a store (``store.create()``, ``store.open()``); every field is set here.

        :param log: what the store loaded (none: an empty log).
        :param ports: the store's writer tail (``None``: read-only), read of older events,
            lease release, checkpointer hook and size limits.
        :param opened: the snapshot it was opened from and what went wrong on open.
        """
        self.id = id
        self.types = types
        # The registry's own dict, read on every append (a method call costs as much as the
        # lookup); registering later adds to this same dict.
        self._type_infos = types._types
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.read_only = ports.tail is None
        self.max_event_bytes = ports.max_event_bytes
        self.max_nesting = ports.max_nesting
        self.projection_cache: dict[object, Any] = dict(opened.states)
        #: Opened with ``salvage=True``: the error that stopped loading (naming its seq), or
        #: ``None`` when the whole stored log loaded.
        self.salvage_fault: EventLogError | None = opened.salvage_fault
        #: Why the latest stored snapshot was not used on open (it did not match the chain,
        #: did not decode, or is of an unknown format), or ``None``; the session was then
        #: loaded by a longer replay (docs/stores.md).
        self.snapshot_fault: str | None = opened.snapshot_fault
        #: The seq of the snapshot this session was opened from, or ``None`` (a full replay).
        self.snapshot_seq: int | None = opened.snapshot_seq
        # The window: ``_events`` holds seqs ``_base..head``, ``_pinned`` the older events
        # still on the surface. A full load: 0 and empty.
        self._events: list[Event] = log.events if log is not None else []
        self._base = log.base if log is not None else 0
        self._pinned: Mapping[int, Event] = log.pinned if log is not None else {}
        self._stored = ports.stored
        self._checkpoint = ports.checkpoint
        # Durable seq, chain hash and fence live in the tail, owned by the store's writer.
        self._tail = ports.tail or StoredTail(self.head, log.last_hash if log is not None else b"")
        self._surface = log.surface if log is not None else SurfaceIndex()
        self._grammar = log.grammar if log is not None else TurnGrammar()
        self._observers: list[Observer] = []
        self._notifying = False
        self._closed = False
        # True whenever append must refuse (notifying, closed, read-only): one check on the hot
        # path, beside the tail's fault; _check_writable says why.
        self._blocked = self.read_only
        self._release = ports.release

    # -- watermarks ----------------------------------------------------------------------------

    @property
    def trims(self) -> bool:
        """Whether a snapshot taken while the session is open also drops from memory the
        events it covers that are not on the surface (once the store's ``trim_every`` of them
        have gathered), as if the session had been reopened from it (docs/stores.md, "A
        long-lived session"). True for a writable session of a store with snapshots and
        ``trim_every`` above 0 (the default), unless it was opened with ``keep_whole=True`` or
        made whole with :meth:`load_history`: those asked to hold their whole log, and do for
        as long as they are open."""
        return self._checkpoint is not None and self._checkpoint.trims

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
        :func:`eventlog._codec.encode_payload`); envelope (a surface operation exactly on surface
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
            sources_tuple = check_envelope(self.id, seq, type, info.surface, surface, sources)
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
            stamp = given_time(self.id, seq, time)
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
                self._checkpoint.replaced(seq)  # a compaction: snapshot at the next flush
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

    @property
    def grammar(self) -> TurnGrammar:
        """Where the log stands structurally (open turn and step); read-only for callers."""
        return self._grammar

    def _payload_of(self, seq: int) -> Any:
        return self._held(seq).data

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
        checkpoint = self._checkpoint
        if checkpoint is not None:
            head = self._base + len(self._events) - 1  # again: appends may have come meanwhile
            if head >= checkpoint.due and self._tail.durable == head:
                checkpoint.flushed(self)

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
