"""Trimming a live session at a snapshot (docs/stores.md, "A long-lived session").

A snapshot taken while a session is open for writing also drops from memory the events it
covers that are not on the surface, as if the session had been reopened from it, so a session
that stays open holds O(``trim_every`` + surface + events since the latest snapshot).
"""

from __future__ import annotations

import logging

from .._session import Session
from .._snapshot_state import CachedState, SnapshotState

__all__ = ("trim_window",)

logger = logging.getLogger("eventlog.session")


def trim_window(
    session: Session, seq: int, trim_every: int, states: tuple[SnapshotState, ...]
) -> None:
    """Hold in ``session``'s memory what an open from a snapshot at ``seq`` would hold: the
    events from ``seq`` on and the older ones still on the surface; drop the rest (they are
    durable: ``session.events()`` reads them from the store, ``load_history`` brings them
    back). Only once at least ``trim_every`` events would go: each trim's O(events held) copy
    is paid once per ``trim_every`` events.

    Never past an event a cached projection has not folded yet: the new window starts at
    ``seq`` or at the lowest ``next_seq`` of the :class:`CachedState` entries in
    ``projection_cache``, if lower. A cached state already before the window does not hold it
    back (that projection could not catch up from memory before either). A cache entry of
    another kind must read only the surface's events (the messages projection's: its cursor
    is the surface's generation), which stay held.

    The cached states of ``states`` (the snapshot just caught them up) are trimmed with it,
    each by its codec's ``trim``: the state is then what a session opened from a snapshot at
    its seq holds, as bounded as the events are.
    """
    old_base = session.loaded_from
    base = seq
    for entry in session.projection_cache.values():
        if isinstance(entry, CachedState) and old_base <= entry.next_seq < base:
            base = entry.next_seq
    if base - old_base < trim_every:
        return
    session._drop_before(base)
    cache = session.projection_cache
    for spec in states:
        entry = cache.get(spec.key)
        if spec.trim is None or not isinstance(entry, CachedState):
            continue
        try:
            entry.state = spec.trim(entry.state)
        except Exception:  # the untrimmed state is still right, only larger
            logger.exception("eventlog: session %r: state %r not trimmed", session.id, spec.key)
