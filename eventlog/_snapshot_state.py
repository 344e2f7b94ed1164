"""Named, versioned codecs of projection state, carried by snapshots (docs/stores.md), and the
cached state a projection keeps on a session.

The log layer cannot import projections, so which states a snapshot carries is passed to the
store (``open_store(url, snapshot_states=...)``; by default the projections' own, see
:mod:`eventlog.stores._states`). Each codec names the key its projection keeps in
``Session.projection_cache`` as a :class:`CachedState` (what :func:`projections.base.catch_up`
keeps there), and gives its fold (``initial`` and ``apply``), so the store can bring a state up
to a snapshot's seq when it writes one, and rebuild a state the snapshot lacks (absent, of
another version, or undecodable) by reading the stored events before the snapshot when it opens
the session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ._errors import ValidationError
from ._event import Event

__all__ = ("CachedState", "SnapshotState", "check_snapshot_states")

S = TypeVar("S")


class CachedState(Generic[S]):
    """A projection's state folded over the events before ``next_seq``: what a projection
    keeps in ``Session.projection_cache`` (see :func:`projections.base.catch_up`). Updated in
    place, so a read after each commit allocates nothing.

    The session never drops from memory an event a cached state has not folded yet (docs/
    stores.md, "A long-lived session"); a snapshot carries the cached states of the codecs its
    store was given.

    :ivar state: the folded state.
    :ivar next_seq: the seq of the first event not folded into it.
    """

    __slots__ = ("next_seq", "state")

    def __init__(self, state: S, next_seq: int) -> None:
        self.state = state
        self.next_seq = next_seq

    def __repr__(self) -> str:
        return f"CachedState(next_seq={self.next_seq})"


@dataclass(frozen=True, slots=True)
class SnapshotState:
    """How one projection's cached state goes into a snapshot and comes back.

    :ivar key: the projection's cache key (a string: it is stored).
    :ivar version: bumped whenever ``encode``'s output changes meaning; a snapshot holding
        another version is not decoded (the state is rebuilt from the events instead).
    :ivar encode: the state to bytes (must not change the state).
    :ivar decode: bytes to a state equal to the one encoded; raise anything on bad bytes.
    :ivar initial: the projection's state before any event.
    :ivar apply: the projection's fold step (may mutate and return the state).
    :ivar trim: the state as a session opened from a snapshot at the state's seq would
        restore it (equal, in what its readers answer, to ``decode(encode(state))``), built
        as new objects, never changing ``state`` (readers may hold views over it). A live
        session that drops from memory the events a snapshot covers (``Session.trims``)
        replaces its cached state by this at the same moment, so the state stays as bounded
        as the events held. ``None``: the cached state is kept as it is (right for a state
        the snapshot carries whole).
    """

    key: str
    version: int
    encode: Callable[[Any], bytes]
    decode: Callable[[bytes], Any]
    initial: Callable[[], Any]
    apply: Callable[[Any, Event], Any]
    trim: Callable[[Any], Any] | None = None


def check_snapshot_states(states: object) -> tuple[SnapshotState, ...]:
    """``states`` as a tuple of codecs, checked; a later codec of a key replaces an earlier.

    :raises ValidationError: not an iterable of :class:`SnapshotState`, a key is not a
        non-empty string, or a version not an int >= 0.
    """
    if isinstance(states, str | bytes) or not isinstance(states, Iterable):
        raise ValidationError(
            f"option snapshot_states must be a sequence of SnapshotState, got {states!r}"
        )
    by_key: dict[str, SnapshotState] = {}
    for state in states:
        if not isinstance(state, SnapshotState):
            raise ValidationError(f"snapshot_states holds {state!r}, not a SnapshotState")
        if not isinstance(state.key, str) or not state.key:
            raise ValidationError(
                f"a snapshot state key must be a non-empty string, got {state.key!r}"
            )
        if type(state.version) is not int or state.version < 0:
            raise ValidationError(
                f"snapshot state {state.key!r}: version must be an int >= 0, got {state.version!r}"
            )
        by_key[state.key] = state
    return tuple(by_key.values())
