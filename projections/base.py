"""The projection protocol and its lazy catch-up (docs/architecture.md).

A projection is a fold: ``initial()`` then ``apply(state, event)`` for each event in order. The
same fold serves a live session (caught up lazily when read, O(new events) per read, nothing at
commit) and a cold rebuild over a stored log (:func:`fold`).

``apply`` may update ``state`` in place and return it, for speed; what a projection *hands to
readers* must then be an immutable snapshot (a tuple, a frozen struct, or a view with a captured
length, :class:`~eventlog.PrefixView`, re-exported here), so a value a reader holds never
changes.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Protocol, TypeVar

from eventlog import CachedState, Event, PrefixView, Session, ValidationError

__all__ = ("PrefixView", "Projection", "catch_up", "events_through", "fold", "read_through")

S = TypeVar("S")


class Projection(Protocol[S]):
    """A pure fold over events. ``key`` identifies its cache slot on a session."""

    @property
    def key(self) -> object: ...

    def initial(self) -> S:
        """The state before any event."""
        ...

    def apply(self, state: S, event: Event) -> S:
        """The state after ``event``; may mutate and return ``state``."""
        ...


def fold(projection: Projection[S], events: Iterable[Event]) -> S:
    """Rebuild a projection's state from scratch over ``events``."""
    state = projection.initial()
    for event in events:
        state = projection.apply(state, event)
    return state


def catch_up(session: Session, projection: Projection[S]) -> S:
    """The projection's state for everything ``session`` committed so far.

    Keeps a :class:`~eventlog.CachedState` in ``session.projection_cache`` under
    ``projection.key`` and applies only the events committed since the last read, from the
    session's window (``session.window``): the session never drops from memory an event a
    cached state has not folded. The cached state is updated in place, so a read after each
    commit allocates little here (less garbage-collector work on a long session).

    :raises EventNotLoadedError: the session holds no cached state for this projection and
        does not hold its whole log (it was opened from, or trimmed at, a snapshot that does
        not carry this projection's state: see ``open_store``'s ``snapshot_states``).
    """
    cache = session.projection_cache
    key = projection.key
    entry: CachedState[S] | None = cache.get(key)
    head = session.head
    if entry is None:
        entry = cache[key] = CachedState(projection.initial(), 0)
    state = entry.state
    next_seq = entry.next_seq
    if next_seq > head:
        return state  # the common read: nothing new, no allocation
    apply = projection.apply
    last = session.last_event
    if head == next_seq and last is not None:
        state = apply(state, last)  # one new event: no window, no iterator
    else:
        for event in session.window(next_seq):
            state = apply(state, event)
    entry.state = state
    entry.next_seq = head + 1
    return state


def events_through(session: Session, at: int) -> Iterable[Event]:
    """The events ``0..at`` of ``session`` (for a fold of what stood after event ``at``).

    Read from the session's window (``session.window(0)``): a session opened from, or
    trimmed at, a snapshot does not hold them all; :func:`read_through` (async) reads them
    from the store on any session.

    :raises ValidationError: ``at`` is not between -1 and the session's head.
    :raises EventNotLoadedError: the session's window does not start at 0.
    """
    _check_at(session, at)
    return itertools.islice(session.window(0), at + 1)


async def read_through(session: Session, at: int) -> list[Event]:
    """The events ``0..at`` of ``session``, read from the store where they are not in memory
    (``session.events``): what the ``*_at`` readers fold on any session.

    :raises ValidationError: ``at`` is not between -1 and the session's head.
    """
    _check_at(session, at)
    return list(await session.events(0, at + 1))


def _check_at(session: Session, at: object) -> None:
    head = session.head
    if type(at) is not int or not -1 <= at <= head:
        raise ValidationError(
            f"session {session.id!r}: at={at!r} is not a seq of the log (-1..{head})",
            session_id=session.id,
        )
