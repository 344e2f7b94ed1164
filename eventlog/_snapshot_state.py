"""Named, versioned codecs of projection state, carried by snapshots (docs/stores.md).

The log layer cannot import projections, so a snapshot carries whatever cached states the
projections registered here: each under the key it keeps in ``Session.projection_cache`` as the
``[state, next_seq]`` cursor of :func:`projections.base.catch_up`. A registered projection also
gives its fold (``initial`` and ``apply``), so the store can bring a state up to a snapshot's seq
when it writes one, and rebuild a state the snapshot lacks (absent, of another version, or
undecodable) by reading the stored events before the snapshot when it opens the session.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._errors import ValidationError
from ._event import Event

__all__ = ("SnapshotState", "register_snapshot_state", "snapshot_states")


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


_REGISTERED: dict[str, SnapshotState] = {}


def register_snapshot_state(state: SnapshotState) -> None:
    """Register (or replace) the codec of the projection cached under ``state.key``.

    :raises ValidationError: the key is not a non-empty string or the version not an int >= 0.
    """
    if not isinstance(state.key, str) or not state.key:
        raise ValidationError(f"a snapshot state key must be a non-empty string, got {state.key!r}")
    if type(state.version) is not int or state.version < 0:
        raise ValidationError(
            f"snapshot state {state.key!r}: version must be an int >= 0, got {state.version!r}"
        )
    _REGISTERED[state.key] = state


def snapshot_states() -> tuple[SnapshotState, ...]:
    """Every registered state codec, in registration order."""
    return tuple(_REGISTERED.values())
