"""The writer's state of one writable session: its watermarks and its rows not yet written.

A :class:`Tail` is what a session holds as its :class:`eventlog._session.SessionTail`: the
session reads ``durable``, ``last_hash`` and ``fault`` and hands it what it commits. Only the
store's writer changes a tail, and a tail changes nothing of the writer's: what the session
asks of it (queue an event, check for room, flush, forget) is passed on to the writer, which
keeps its own counters.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, Protocol

from .._codec import CHAIN_VERSION, Row, chain_version_of, make_rows
from .._errors import ConflictError, EventLogError, StoreWriteError
from .._event import Event
from .._strict import INT64_MAX, INT64_MIN


class _Writer(Protocol):
    """What a tail passes on to its store's writer (``_writer.Writer``, which imports this
    module: the writer is described here rather than imported)."""

    pending_bytes: int
    max_pending_bytes: int

    @property
    def closed(self) -> bool: ...

    def check_room(self, session_id: str, seq: int, nbytes: int, waiting: int) -> None: ...

    def enqueue(self, tail: Tail, event: Event, data: bytes) -> None: ...

    def flush(self, tail: Tail, target: int) -> Coroutine[Any, Any, None]: ...

    def forget(self, tail: Tail) -> None: ...


__all__ = ("Tail",)


def _unstorable(event: Event) -> str:
    """Why a store cannot hold ``event`` exactly (one of its integer columns is out of range)."""
    for name, value in (("seq", event.seq), ("time", event.time)):
        if type(value) is not int or not INT64_MIN <= value <= INT64_MAX:
            return f"{name} {value!r} is not a 64-bit integer"
    return "an integer column is out of range"


class Tail:
    """The writer's state of one writable session (see :class:`eventlog._session.SessionTail`
    for the part the session reads).

    :ivar durable: the last seq known durable in the store (only grows).
    :ivar last_hash: the chain hash of the last event turned into a row.
    :ivar fault: the error that fenced the session, or ``None`` (once set, it stays).
    :ivar taken: the last seq handed to a round (the one in flight, when there is one).
    """

    __slots__ = (
        "_w",
        "binding",
        "durable",
        "fault",
        "last_hash",
        "queued",
        "rows",
        "session_id",
        "taken",
    )

    def __init__(self, writer: _Writer, session_id: str, last_hash: bytes, durable: int) -> None:
        self._w = writer
        self.session_id = session_id
        self.durable = durable
        self.last_hash = last_hash
        version = chain_version_of(last_hash) if last_hash else CHAIN_VERSION
        # The id format-2 hashes bind (format 1, of old sessions, binds none).
        self.binding = session_id if version == 2 else None
        self.fault: EventLogError | None = None
        # Committed events not yet turned into rows, and rows built by a round that failed
        # (written first next time). Rows are built by the round, not at commit, so the hash
        # chain costs the writer, not ``append``.
        self.queued: list[tuple[Event, bytes]] = []
        self.rows: list[Row] = []
        self.taken = durable

    # -- what the session asks (passed on to the writer) ---------------------------------------

    def check_room(self, seq: int, nbytes: int, waiting: int = 0) -> None:
        """Refuse a commit that would grow the store's backlog past its limit (once ``waiting``
        more bytes are committed before it).

        :raises ClosedError: the store is closed.
        :raises BacklogFullError: too many bytes wait to be written.
        """
        w = self._w
        pending = w.pending_bytes + waiting
        if w.closed or (pending and pending + nbytes > w.max_pending_bytes):
            w.check_room(self.session_id, seq, nbytes, waiting)  # raises

    def enqueue(self, event: Event, data: bytes) -> None:
        """Queue a committed event and its payload bytes (and wake the background writer)."""
        self._w.enqueue(self, event, data)

    def flush(self, target: int) -> Coroutine[Any, Any, None]:
        """Return once seq ``target`` is durable (see :meth:`Writer.flush`); the writer's own
        coroutine, so a flush awaits one frame less."""
        return self._w.flush(self, target)

    def forget(self) -> None:
        """Drop this session's unwritten events (it was fenced or closed)."""
        self._w.forget(self)

    # -- what the writer does to it ------------------------------------------------------------

    def drop(self) -> int:
        """Drop the events and rows not yet written; return their payload bytes."""
        dropped = sum([len(data) for _, data in self.queued])
        dropped += sum([len(row.data) for row in self.rows])
        self.queued = []
        self.rows = []
        return dropped

    def take(self) -> tuple[list[Row], int]:
        """Everything waiting, as rows (those of a failed round first), continuing the hash
        chain; noted as :attr:`taken`. Returns the rows and the payload bytes of the events
        refused because no store can hold them (the session is then fenced at the first)."""
        rows, self.rows = self.rows, []
        items, self.queued = self.queued, []
        refused = 0
        if items:
            built = make_rows(self.last_hash, items, self.binding)
            if built:
                rows += built
                self.last_hash = built[-1].hash
            if len(built) < len(items):
                # Checked here, once per row, so no backend ever sees such a row.
                refused = self._refuse(items[len(built) :])
        if rows:
            self.taken = rows[-1].seq
        return rows, refused

    def _refuse(self, dropped: list[tuple[Event, bytes]]) -> int:
        """Fence the session at a row no store can hold; its rows before it are still
        written. Returns the refused events' payload bytes."""
        event = dropped[0][0]
        seq = event.seq
        self.fault = StoreWriteError(
            f"session {self.session_id!r}, seq {seq}: the event cannot be stored: "
            f"{_unstorable(event)}; this session is fenced (events from seq {seq} on are not "
            "written)",
            session_id=self.session_id,
            seq=seq,
            hint="reopen the session to continue from the stored log",
        )
        return sum([len(data) for _, data in dropped])

    def written(self, rows: list[Row]) -> None:
        """``rows`` (taken by a round) are durable."""
        if rows[-1].seq > self.durable:
            self.durable = rows[-1].seq

    def conflicted(self, rows: list[Row]) -> None:
        """Another writer advanced the stored log under ``rows``: fence the session."""
        self.fault = ConflictError(
            f"session {self.session_id!r}, seq {rows[0].seq}: another writer advanced the "
            f"stored log past seq {rows[0].seq - 1}; this session is fenced",
            session_id=self.session_id,
            seq=rows[0].seq,
            hint="reopen the session to continue from the stored log",
        )

    def raise_if_fenced(self) -> None:
        """:raises EventLogError: a copy of the error that fenced the session."""
        fault = self.fault
        if fault is not None:
            raise type(fault)(
                fault.message, session_id=self.session_id, seq=fault.seq, hint=fault.hint
            )
