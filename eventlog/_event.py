"""The event envelope and the surface operations."""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ("APPEND", "Append", "Event", "Replace", "SurfaceOp", "Unknown")


class Append(msgspec.Struct, frozen=True, tag="append"):
    """Surface operation: the event's message joins the end of the surface."""


class Replace(msgspec.Struct, frozen=True, tag="replace"):
    """Surface operation: the event replaces the inclusive span of current surface nodes.

    ``start`` and ``end`` are seqs of events currently on the surface, ``start <= end``.
    """

    start: int
    end: int


SurfaceOp = Append | Replace

#: The one ``Append`` instance; compare with ``is`` or ``==``.
APPEND = Append()


class Unknown(msgspec.Struct, frozen=True):
    """Payload of a stored ignorable event whose type this process does not know: raw JSON."""

    raw: bytes


class Event(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One committed event. ``seq`` equals its index in the session's log.

    Not tracked by the garbage collector (``gc=False``): an event is frozen and holds a payload
    decoded from JSON, so it cannot be part of a reference cycle, and a session of 160,000
    events would otherwise make every collection walk them all.

    :ivar time: epoch milliseconds at commit.
    :ivar surface: ``APPEND``, a :class:`Replace`, or ``None`` (only surface types carry one).
    :ivar sources: seqs of earlier events this one derives from (unique, all ``< seq``).
    :ivar ignorable: a reader that does not know ``type`` may skip this event.
    """

    seq: int
    type: str
    time: int
    data: Any
    surface: SurfaceOp | None = None
    sources: tuple[int, ...] = ()
    ignorable: bool = False
