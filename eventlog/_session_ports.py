"""What a session is built from and wired to, fixed when it is built.

A :class:`~eventlog.Session` keeps its window of events and commits; everything else is a port
its store hands it once, at construction: the writer's tail (:class:`SessionTail`), the store's
read of older events, the release of its lease and the checkpointer's hook
(:class:`Checkpoint`). :class:`Opened` says how it was opened (from which snapshot, what was
wrong), :class:`LoadedLog` is what the store's loader read.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from ._errors import ClosedError, EventLogError
from ._event import Event
from ._grammar import TurnGrammar
from ._snapshot_state import CachedState
from ._strict import DEFAULT_MAX_NESTING
from ._surface import SurfaceIndex

#: The session the ports serve (``eventlog.Session``): a type parameter, so this module, which
#: the session's module imports, names nothing of it (no import cycle, not even for types).
S = TypeVar("S", contravariant=True)

__all__ = (
    "DEFAULT_MAX_EVENT_BYTES",
    "Checkpoint",
    "LoadedLog",
    "Opened",
    "SessionPorts",
    "SessionTail",
    "StoredEvents",
    "StoredTail",
)

#: Default ceiling of one event's encoded payload.
DEFAULT_MAX_EVENT_BYTES = 8 * 1024 * 1024

#: ``read(from_seq, limit)``: the stored events of this session from ``from_seq``, at most
#: ``limit`` (the store's ``read``); how a session reaches events before its window.
StoredEvents = Callable[[int, int], AsyncIterator[Event]]


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

    def check_room(self, seq: int, nbytes: int, waiting: int = 0) -> None:
        """Refuse (raise) a commit of ``nbytes`` at ``seq`` that the store cannot take now, or
        once ``waiting`` more bytes are committed before it (a request checked whole)."""
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


class StoredTail:
    """The tail of a session opened read-only: everything loaded is durable, nothing is
    written."""

    __slots__ = ("durable", "fault", "last_hash")

    def __init__(self, durable: int, last_hash: bytes) -> None:
        self.durable = durable
        self.last_hash = last_hash
        self.fault: EventLogError | None = None

    def check_room(self, seq: int, nbytes: int, waiting: int = 0) -> None:
        raise ClosedError("a read-only session takes no commits")

    def enqueue(self, event: Event, data: bytes) -> None:
        raise ClosedError("a read-only session takes no commits")

    async def flush(self, target: int) -> None:
        return None

    def forget(self) -> None:
        return None


class Checkpoint(Protocol[S]):
    """A writable session's snapshots, owned by its store's checkpointer: when the next one
    is due, taking it, and dropping from memory the events it covers (the session's one hook
    for snapshots; see :mod:`eventlog.stores._checkpointer`)."""

    #: The head at which the next snapshot is due (a compaction makes it due at once).
    due: int

    @property
    def trims(self) -> bool:
        """Whether a snapshot taken while the session is open also trims its window."""
        ...

    def replaced(self, seq: int) -> None:
        """A surface ``Replace`` (a compaction) was committed at ``seq``: a snapshot is due
        at the next flush."""
        ...

    def flushed(self, session: S) -> None:
        """Everything up to ``session.head`` is durable and ``head >= due``: take the
        snapshot (and trim the session's window, if it trims). Never raises."""
        ...

    def keep_whole(self) -> None:
        """The session holds its whole log from now on: no snapshot trims it any more."""
        ...


class LoadedLog(Protocol):
    """A stored log as the store's loader read it (:class:`eventlog.stores.LogLoader`)."""

    #: Events from seq ``base`` on; ``pinned``: the older events still on the surface.
    events: list[Event]
    base: int
    pinned: dict[int, Event]
    surface: SurfaceIndex
    grammar: TurnGrammar
    last_hash: bytes


@dataclass(frozen=True, slots=True)
class SessionPorts(Generic[S]):
    """What a session of a store is wired to (defaults: a session of no store).

    :ivar tail: the writer's tail; ``None``: read-only (nothing is written).
    :ivar stored: the store's read of this session's stored events, or ``None``.
    :ivar release: called once by ``aclose`` (the store releases the lease).
    :ivar checkpoint: the checkpointer's hook, or ``None`` (no snapshots).
    :ivar max_event_bytes: ceiling of one event's encoded payload.
    :ivar max_nesting: how deep containers may nest in a payload.
    """

    tail: SessionTail | None = None
    stored: StoredEvents | None = None
    release: Callable[[S], Awaitable[None]] | None = None
    checkpoint: Checkpoint[S] | None = None
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    max_nesting: int = DEFAULT_MAX_NESTING


@dataclass(frozen=True, slots=True)
class Opened:
    """How a session was opened.

    :ivar snapshot_seq: the seq of the snapshot it was opened from, or ``None``.
    :ivar snapshot_fault: why the stored snapshot was not used, or ``None``.
    :ivar salvage_fault: with ``salvage=True``, the error that stopped loading, or ``None``.
    :ivar states: the projections' cached states restored from the snapshot, by key.
    """

    snapshot_seq: int | None = None
    snapshot_fault: str | None = None
    salvage_fault: EventLogError | None = None
    states: Mapping[object, CachedState[object]] = field(default_factory=dict)
