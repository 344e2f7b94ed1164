"""A session's window: the events it holds in memory, as a value whose type says so.

A session opened from a snapshot, or one that dropped older events at a snapshot while open
(docs/stores.md, "A long-lived session"), holds every event from its window's ``start`` on
and, before that, only the events on its surface. :class:`EventWindow` is what the synchronous
readers get (``Session.window()``): it never pretends to reach before ``start``; a complete
read of older events is ``await session.events(from_seq)``.
"""

from __future__ import annotations

from collections.abc import Mapping

from ._errors import EventNotLoadedError
from ._event import Event
from ._prefix import PrefixView

__all__ = ("EventWindow", "not_loaded")


class EventWindow(PrefixView[Event]):
    """The events ``start..stop - 1`` a session holds in memory, made when asked: later
    appends and later trims do not show through (it keeps the list it was made over).
    Indexed from ``start`` (``window[0]`` is event ``start``), like any sequence.

    :ivar start: the seq of its first event.
    :ivar stop: one past the seq of its last event (``start`` when empty).
    """

    __slots__ = ("_first", "_pinned", "_session_id")
    _index_name = "event index"

    def __init__(
        self,
        events: list[Event],
        first: int,
        start: int,
        stop: int,
        pinned: Mapping[int, Event],
        session_id: str,
    ) -> None:
        # ``events[0]`` is event ``first``; the window covers ``start..stop - 1``. The fields
        # are set here, not through PrefixView's checks: a projection makes one per read.
        self._items = events
        self._start = start - first
        self._stop = stop - first
        self._first = first
        self._pinned = pinned
        self._session_id = session_id

    @property
    def start(self) -> int:
        """The seq of the window's first event."""
        return self._first + self._start

    @property
    def stop(self) -> int:
        """One past the seq of the window's last event."""
        return self._first + self._stop

    def event(self, seq: int) -> Event:
        """Event ``seq``: one of the window's, or an older one on the session's surface (the
        session always holds those: the messages the model sees). O(1), allocates nothing.

        :raises IndexError: ``seq`` is negative or past the window.
        :raises EventNotLoadedError: ``seq`` is before ``start`` and not on the surface.
        """
        index = seq - self._first  # fields, not the properties: once per surface event
        if self._start <= index < self._stop:
            return self._items[index]
        if 0 <= seq < self.start:
            event = self._pinned.get(seq)
            if event is None:
                raise not_loaded(self._session_id, seq, self.start)
            return event
        raise IndexError(f"session {self._session_id!r}: seq {seq} is not in the window")

    def __repr__(self) -> str:
        return f"EventWindow(seq {self.start}..{self.stop - 1})"


def not_loaded(session_id: str, seq: int, start: int) -> EventNotLoadedError:
    """The error of a synchronous read of event ``seq``, before a window starting at ``start``."""
    return EventNotLoadedError(
        f"session {session_id!r}, seq {seq}: before the session's window (it holds the "
        f"surface's events and every event from seq {start}: it was opened from, or trimmed "
        "at, a snapshot)",
        session_id=session_id,
        seq=seq,
        hint="read older events with `await session.events(from_seq)` (from the store)",
    )
