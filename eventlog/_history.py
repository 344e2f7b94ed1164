"""The reading side of a session: its window of events in memory and complete reads.

A session holds every event from its window's start (:attr:`SessionHistory.loaded_from`) on and,
before it, the events on its surface. :meth:`SessionHistory.window` hands out what it holds,
synchronously, as an :class:`~eventlog._window.EventWindow`; :meth:`SessionHistory.events` and
:meth:`SessionHistory.read_events` read any range, from the store where it lies before the
window, so what they answer never depends on how long the session is. The store's checkpointer
moves the window's start at its snapshots (:meth:`SessionHistory._drop_before`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from ._errors import EventNotLoadedError, ValidationError
from ._event import Event
from ._session_ports import Checkpoint, StoredEvents
from ._surface import SurfaceIndex
from ._window import EventWindow, not_loaded

__all__ = ("SessionHistory",)


class SessionHistory:
    """The events a :class:`~eventlog.Session` holds and how it reads the others (a base of
    ``Session``, which sets these fields once, when it is built)."""

    id: str
    projection_cache: dict[object, Any]
    # The window: ``_events`` holds seqs ``_base..head``, ``_pinned`` the older events still
    # on the surface. A full load: 0 and empty.
    _events: list[Event]
    _base: int
    _pinned: Mapping[int, Event]
    _surface: SurfaceIndex
    _stored: StoredEvents | None
    _checkpoint: Checkpoint[Any] | None

    @property
    def head(self) -> int:
        """The last committed seq (-1 when empty)."""
        return self._base + len(self._events) - 1

    @property
    def loaded_from(self) -> int:
        """The first seq held in memory with every later one: 0 for a full load, else the seq
        of the snapshot the session was opened from or, later, of the latest snapshot taken
        while it is open (see :attr:`trims`): the start of :meth:`window`; older events are
        read with :meth:`events`. It only grows, until :meth:`load_history` sets it to 0."""
        return self._base

    def window(self, from_seq: int | None = None) -> EventWindow:
        """The events held in memory from ``from_seq`` (default: the window's start,
        :attr:`loaded_from`) to the head, as an immutable view (O(1); later appends and trims
        do not show through). Synchronous, so it reads memory only: a session holds every
        event from :attr:`loaded_from` on and, before it, the surface's
        (:meth:`EventWindow.event` reads those too). The window starts at 0 until the session
        is opened from, or trimmed at, a snapshot; code that needs older events reads them
        with :meth:`events` (async, complete), which never depends on the session's length.

        :raises ValidationError: ``from_seq`` is not an int.
        :raises EventNotLoadedError: ``from_seq`` is before the window's start.
        """
        base = self._base
        stop = base + len(self._events)
        if from_seq is None:
            start = base
        elif type(from_seq) is not int:
            raise ValidationError(
                f"session {self.id!r}: from_seq must be an int (a seq), got {from_seq!r}",
                session_id=self.id,
            )
        elif from_seq < base:
            raise not_loaded(self.id, max(0, from_seq), base)
        else:
            start = from_seq if from_seq < stop else stop
        return EventWindow(self._events, base, start, stop, self._pinned, self.id)

    @property
    def last_event(self) -> Event | None:
        """The event at the head (``None`` when the log is empty): always held, read in O(1)
        without allocating (a projection reads the one new event after each commit so)."""
        return self._events[-1] if self._events else None

    async def events(self, from_seq: int = 0, limit: int | None = None) -> Sequence[Event]:
        """Every committed event from ``from_seq`` (at most ``limit``) up to the head as of
        the call, in seq order, whatever the session holds in memory: those before the
        window (:attr:`loaded_from`) read from the store (decoded as ``store.read`` does; the
        chain is checked by ``verify``, not here), the rest from memory. When the window
        covers the range, the answer is a view of it (O(1)); otherwise a list (O(range)).
        Indexed from ``from_seq``. To stream a long range, use :meth:`read_events`.

        :raises ValidationError: ``from_seq`` or ``limit`` is not an int (``limit >= 0``).
        :raises EventNotLoadedError: older events are needed and the session has no store to
            read them from, or the store no longer holds one.
        """
        self._check_range(from_seq, limit)
        start = max(0, from_seq)
        if start >= self._base:
            stop = self._base + len(self._events)
            if limit is not None:
                stop = min(stop, start + limit)
            return EventWindow(self._events, self._base, min(start, stop), stop, {}, self.id)
        return [event async for event in self.read_events(from_seq, limit)]

    def _check_range(self, from_seq: object, limit: object) -> None:
        if type(from_seq) is not int or (
            limit is not None and (type(limit) is not int or limit < 0)
        ):
            raise ValidationError(
                f"session {self.id!r}: events are read from an int from_seq, at most an int "
                f"limit >= 0 or None of them, got {from_seq!r}, {limit!r}",
                session_id=self.id,
            )

    async def read_events(
        self, from_seq: int = 0, limit: int | None = None
    ) -> AsyncIterator[Event]:
        """:meth:`events`, streamed: the events up to the head as of the call, also when a
        snapshot drops some of them from memory while the caller iterates.

        :raises ValidationError: ``from_seq`` or ``limit`` is not an int (``limit >= 0``).
        :raises EventNotLoadedError: older events are needed and the session has no store to
            read them from, or the store no longer holds one.
        """
        self._check_range(from_seq, limit)
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
                raise not_loaded(self.id, seq, base)
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
        full open would have (decoded, not re-verified: ``verify`` checks the chain).
        Afterwards ``loaded_from`` is 0, the window holds the whole log, and the
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
        if self._checkpoint is not None:
            self._checkpoint.keep_whole()
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

    @property
    def pinned(self) -> Mapping[int, Event]:
        """The events before :attr:`loaded_from` held in memory (those on the surface when
        the session was opened from, or last trimmed at, a snapshot); empty after a full
        load. Read-only."""
        return self._pinned

    def _held(self, seq: int) -> Event:
        """Event ``seq`` from memory (the window or the surface; see :meth:`EventWindow.event`)."""
        if seq >= self._base:
            return self._events[seq - self._base]
        event = self._pinned.get(seq)
        if event is None:
            raise not_loaded(self.id, seq, self._base)
        return event

    def _drop_before(self, base: int) -> None:
        """Move the window's start to ``base``: hold the events from ``base`` on and the older
        ones still on the surface, drop the rest (they are durable: :meth:`events` reads them
        from the store). For the checkpointer, which decides when and to where. Views handed
        out before keep the lists they were made over (never changed in place: the session
        moves to new ones), so they stay valid and keep those events alive until dropped."""
        old_base = self._base
        events, pinned = self._events, self._pinned
        kept: dict[int, Event] = {}
        for node in self._surface.nodes:  # not in seq order after a replace: look at all
            if node < base:
                kept[node] = events[node - old_base] if node >= old_base else pinned[node]
        self._events = events[base - old_base :]
        self._pinned = kept
        self._base = base
