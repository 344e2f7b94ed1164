"""The store-side write queue: group commit across sessions, the flush barrier.

Committed rows wait here until a write round writes them. One round takes everything pending
for every session and hands it to the store in one call (one transaction). Rounds run one after
another, so a flush that waits for the round that starts after its call is guaranteed to cover
every event committed before the call.

Each writable session has one :class:`_SessionTail`, owned by the writer: its durable seq, the
hash chain's head and binding, the error that fenced it and its rows not yet written. The
session reads its watermarks through the tail's narrow interface
(:class:`eventlog._session.SessionTail`) and never changes them.

Failure keeps the batch at the front of the queue: nothing committed is dropped, ``flush()``
raises :class:`StoreWriteError` and the next round retries. A conflict (the stored tail moved
under a session) fences that session only; the other sessions of the round are still written.

A row no store can hold (an integer column outside 64 bits: SQLite would fail the whole round
or store it as REAL, PostgreSQL would fail the round) never reaches a backend: its session's
rows before it are written with the round, and the session is fenced with a
:class:`StoreWriteError` naming the seq; the other sessions of the round are not affected.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Collection, Coroutine, Sequence
from typing import Any, NamedTuple

import anyio
from anyio.abc import TaskGroup, TaskStatus

from .._codec import CHAIN_VERSION, Row, chain_version_of, make_rows
from .._errors import BacklogFullError, ClosedError, ConflictError, EventLogError, StoreWriteError
from .._event import Event
from .._strict import INT64_MAX, INT64_MIN

__all__ = ("Batch", "StartWrite", "WriteDone", "WriteFunction", "Writer")

logger = logging.getLogger("eventlog.writer")


class Batch(NamedTuple):
    """The rows of one session written in one round.

    ``expected_head`` is the stored head the rows continue (``rows[0].seq - 1``); the store must
    refuse the batch (report a conflict) when the stored head differs.
    """

    session_id: str
    expected_head: int
    rows: Sequence[Row]


#: ``await write(batches)`` writes every batch in one transaction and returns the ids of the
#: sessions whose ``expected_head`` did not match (those rows were not written).
WriteFunction = Callable[[Sequence[Batch]], Awaitable[Collection[str]]]

#: Called on the event loop's thread when a started write ended: the conflicting session ids
#: (as :data:`WriteFunction` returns them), or the error.
WriteDone = Callable[[Collection[str], BaseException | None], None]

#: ``start(batches, done)`` starts the same write as :data:`WriteFunction` off the event loop's
#: thread (a backend's writer thread) and returns at once; ``done`` is called when it ended.
#: Whoever called it, no task waits for the write, so a cancelled caller never cancels it.
StartWrite = Callable[[Sequence[Batch], WriteDone], None]

#: A round is started at once, from the flush that asks for it, when this many sessions or
#: more are queued and they are at least half of the larger of the last two rounds (see
#: :meth:`Writer._pipeline_due`).
_PIPELINE_FROM = 16


def _unstorable(event: Event) -> str:
    """Why a store cannot hold ``event`` exactly (one of its integer columns is out of range)."""
    for name, value in (("seq", event.seq), ("time", event.time)):
        if type(value) is not int or not INT64_MIN <= value <= INT64_MAX:
            return f"{name} {value!r} is not a 64-bit integer"
    return "an integer column is out of range"


class _Round:
    """One write round; flush callers wait for it to finish."""

    __slots__ = ("done", "error")

    def __init__(self, new_event: Callable[[], anyio.Event] = anyio.Event) -> None:
        self.done = new_event()
        self.error: BaseException | None = None


class _SessionTail:
    """The writer's state of one writable session (see :class:`eventlog._session.SessionTail`
    for the part the session reads).

    :ivar durable: the last seq known durable in the store.
    :ivar last_hash: the chain hash of the last event turned into a row.
    :ivar fault: the error that fenced the session, or ``None``.
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

    def __init__(self, writer: Writer, session_id: str, last_hash: bytes, durable: int) -> None:
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
        # The last seq handed to a round (the one in flight, when there is one).
        self.taken = durable

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
        w = self._w
        if not self.queued and not self.rows:
            w.waiting[self] = None
        self.queued.append((event, data))
        w.pending_bytes += len(data)
        if not w.woken:
            w.wake()

    def flush(self, target: int) -> Coroutine[Any, Any, None]:
        """Return once seq ``target`` is durable (see :meth:`Writer.flush`); the writer's own
        coroutine, so a flush awaits one frame less."""
        return self._w.flush(self, target)

    def forget(self) -> None:
        """Drop this session's unwritten events (it was fenced or closed)."""
        self._w.forget(self)

    def fence(self, error: EventLogError) -> None:
        self.fault = error


class Writer:
    """The queue and the write rounds of one store.

    A round takes everything pending and starts its write at once, from whichever task asks
    (a flush, or the background writer after ``write_delay``); rounds never overlap, and a round
    asked for while one is in flight starts the moment that one ends. The write runs in a task
    of the store's task group (one task writes every round), shielded, so a cancelled flush
    caller never cancels or waits for a write, and closing the store never leaves "did it
    commit?" unanswerable.

    With ``start`` (a backend that writes on a thread of its own) or ``pipeline`` (a backend
    whose write waits on a database server), many sessions flushing in step are written as two
    alternating rounds, a pipeline: when the sessions queued reach half of those the last two
    rounds wrote, the flush that brings them there starts their round at once (on the
    backend's thread, or in a task of its own), and the others' appends run on the event loop
    meanwhile; a round that ends with sessions queued starts the next at once too, before its
    flushers are woken. One round for everyone would leave the loop idle during each commit
    and the disk idle during the appends.

    :param write: the store's batch write (see :data:`WriteFunction`).
    :param start: the same write started on the backend's thread (see :data:`StartWrite`), or
        ``None``.
    :param pipeline: pipeline rounds without ``start``: each pipelined round's ``write`` runs
        in a task of its own (shielded) instead of the rounds task. Implied by ``start``.
    :param write_delay: seconds the background writer waits for more events before a round.
    :param max_pending_bytes: committed-but-unwritten bytes allowed before ``append`` refuses.
    """

    def __init__(
        self,
        write: WriteFunction,
        *,
        start: StartWrite | None = None,
        pipeline: bool = False,
        write_delay: float = 0.010,
        max_pending_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        self._write = write
        self._start = start
        self._pipeline = pipeline or start is not None
        # Sessions written by the last two rounds (what a pipelined round is measured against),
        # and whether the round in flight was started on the backend's thread.
        self._last_sizes = (0, 0)
        self._pipelined = False
        self._write_delay = write_delay
        self.max_pending_bytes = max_pending_bytes
        self.pending_bytes = 0
        #: The tails with queued events or rows, in queueing order (a dict as an ordered set).
        self.waiting: dict[_SessionTail, None] = {}
        self._next_round = _Round()
        # The round whose write is in flight, and whether another was asked for meanwhile.
        # Rounds never overlap: a batch's expected head is the durable seq of the round before.
        self._in_flight: _Round | None = None
        self._again = False
        # A round is asked of the rounds task, which has not taken its rows yet.
        self._scheduled = False
        self._round_wanted = anyio.Event()
        self._wake = anyio.Event()
        #: Whether ``_wake`` is set (read on every commit: cheaper than asking the event).
        self.woken = False
        # When the oldest event not yet taken by a round was queued (``time.monotonic``).
        self._since = 0.0
        self.closed = False
        # After a failed round the background writer waits longer before retrying on its own
        # (a flush still retries at once), so a failing disk is not hammered every 10 ms.
        self._backoff = 0.0
        self._task_group: TaskGroup | None = None
        self._new_event: Callable[[], anyio.Event] = anyio.Event

    def tail(self, session_id: str, last_hash: bytes, durable: int) -> _SessionTail:
        """The tail of a session opened for writing, its stored log ending at ``durable`` with
        chain hash ``last_hash``."""
        return _SessionTail(self, session_id, last_hash, durable)

    # -- commit side (synchronous, called from Session.append) ---------------------------------

    def check_room(self, session_id: str, seq: int, nbytes: int, waiting: int = 0) -> None:
        """Refuse a commit that would grow the backlog past ``max_pending_bytes`` (once
        ``waiting`` more bytes are committed before it)."""
        if self.closed:
            raise ClosedError(f"session {session_id!r}: the store is closed", session_id=session_id)
        pending = self.pending_bytes + waiting
        if pending and pending + nbytes > self.max_pending_bytes:
            raise BacklogFullError(
                f"session {session_id!r}, seq {seq}: {pending} bytes "
                f"would be waiting to be written (limit {self.max_pending_bytes})"
                if waiting
                else f"session {session_id!r}, seq {seq}: {pending} bytes "
                f"are waiting to be written (limit {self.max_pending_bytes})",
                session_id=session_id,
                seq=seq,
                hint="the store is not keeping up or is failing; flush() shows why",
            )

    def wake(self) -> None:
        """Wake the background writer: the first event since its last round was queued."""
        self.woken = True
        self._since = time.monotonic()
        self._wake.set()

    # -- flush side ----------------------------------------------------------------------------

    async def flush(self, tail: _SessionTail, target: int) -> None:
        """Return when seq ``target`` of ``tail``'s session is durable.

        A flush whose events a round in flight already holds waits for that round only; any
        other waits for the next round (it starts after this call, so it covers everything
        committed before). Every flusher of a round waits on the round's one event.

        :raises StoreWriteError: the round that should have written it failed.
        :raises ConflictError: the session was fenced.
        :raises ClosedError: the store is closed.
        """
        while tail.durable < target:
            if tail.fault is not None:
                self._raise_if_fenced(tail)
            if self._task_group is None:
                raise ClosedError(
                    f"session {tail.session_id!r}: the store is closed", session_id=tail.session_id
                )
            round_ = self._in_flight
            if round_ is None or tail.taken < target:
                round_ = self._ask_for_round()
            await round_.done.wait()
            if tail.fault is not None:
                self._raise_if_fenced(tail)
            if round_.error is not None and tail.durable < target:
                raise StoreWriteError(
                    f"session {tail.session_id!r}: writing seqs {tail.durable + 1}..{target} "
                    f"failed: {round_.error}",
                    session_id=tail.session_id,
                    seq=tail.durable + 1,
                    hint="the events stay queued; the next flush retries",
                ) from round_.error

    @staticmethod
    def _raise_if_fenced(tail: _SessionTail) -> None:
        fault = tail.fault
        if fault is not None:
            raise type(fault)(
                fault.message, session_id=tail.session_id, seq=fault.seq, hint=fault.hint
            )

    def forget(self, tail: _SessionTail) -> None:
        """Drop a session's unwritten events (it was fenced or closed)."""
        self.waiting.pop(tail, None)
        self.pending_bytes -= sum([len(data) for _, data in tail.queued])
        self.pending_bytes -= sum([len(row.data) for row in tail.rows])
        tail.queued = []
        tail.rows = []

    # -- rounds --------------------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The background writer; start with ``await task_group.start(writer.run)``."""
        task_status.started()
        while True:
            await self._wake.wait()
            # The delay counts from the oldest waiting event: events queued while the previous
            # round was writing have waited already.
            delay = max(self._write_delay - (time.monotonic() - self._since), self._backoff)
            if delay > 0:
                await anyio.sleep(delay)
            self._wake = self._new_event()
            self.woken = False
            await self._next_round_done()

    async def start(self, task_group: TaskGroup) -> None:
        """Start the writer's tasks inside the store's task group."""
        self._task_group = task_group
        # The event loop's own event class, taken here, in a task. ``anyio.Event()`` finds the
        # running library through the current task, so one made in a plain callback (a round
        # opened when the writer thread's answer arrives) is an adapter that finds it on every
        # wait instead: an extra frame and a library lookup for every flusher of the round.
        self._new_event = type(anyio.Event())
        await task_group.start(self.run)
        await task_group.start(self._rounds)

    async def _rounds(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The task that writes the rounds, one after another (waking it costs less than
        starting a task per round)."""
        task_status.started()
        while True:
            await self._round_wanted.wait()
            self._round_wanted = self._new_event()
            await self._write_round()

    async def _next_round_done(self) -> _Round:
        """Ask for the next round and return it once it finished."""
        round_ = self._ask_for_round()
        await round_.done.wait()
        return round_

    def _ask_for_round(self) -> _Round:
        """Ask for the next round (after the one in flight, if any) and return it."""
        if self._in_flight is not None:
            self._again = True
        elif self._pipeline and self._pipeline_due():
            # Started here, not by the rounds task (which then finds nothing asked of it).
            self._scheduled = False
            return self._start_round()
        elif not self._scheduled:
            self._schedule_round()
        # else: the round is scheduled and takes everything queued when it starts.
        return self._next_round

    def _pipeline_due(self) -> bool:
        """Whether the sessions queued are many, and at least half of the larger of the last two
        rounds: then their round starts now and the rest of the sessions in step share the
        next."""
        queued = len(self.waiting)
        return queued >= _PIPELINE_FROM and 2 * queued >= max(self._last_sizes) > 0

    def _start_round(self) -> _Round:
        """Take everything queued and start its write now, on the backend's thread or in a task
        of its own; return the round (the one in flight, or the next when nothing was
        queued)."""
        if self._task_group is None:  # closed: the round fails at once, as a scheduled one
            round_ = self._next_round
            self._write_round_now_failed()
            return round_
        round_, taken = self._open_round()
        if not taken:
            return round_
        self._pipelined = True
        batches = self._batches(taken)

        def done(conflicts: Collection[str], error: BaseException | None) -> None:
            self._finish(round_, taken, conflicts if error is None else (), error)

        try:
            if self._start is None:
                self._task_group.start_soon(self._write_taken, round_, taken, batches)
            else:
                self._start(batches, done)
        except Exception as exc:  # nothing was started: the rows go back to the queue
            self._finish(round_, taken, (), exc)
        return round_

    def _schedule_round(self) -> None:
        """Ask the rounds task (of the store's task group: a cancelled flush caller neither
        cancels nor waits for the write) for the next round. The round takes what is queued
        when that task runs, not now: the flushers woken by the round before (ready to run, ahead of
        it) commit and join it first, instead of each cohort splitting into a round of one
        flusher and a round of all the others."""
        if self._task_group is None:  # closed while this round waited for the one before
            self._write_round_now_failed()
            return
        self._scheduled = True
        self._round_wanted.set()

    def _open_round(self) -> tuple[_Round, list[tuple[_SessionTail, list[Row]]]]:
        """Make the next round the one in flight with everything queued, as rows; with nothing
        queued it is done at once (and not in flight)."""
        round_, self._next_round = self._next_round, _Round(self._new_event)
        self._again = False
        taken = self._take()
        if taken:
            self._in_flight = round_
        else:
            round_.done.set()
        return round_, taken

    @staticmethod
    def _batches(taken: list[tuple[_SessionTail, list[Row]]]) -> list[Batch]:
        return [Batch(tail.session_id, tail.durable, rows) for tail, rows in taken]

    def _write_round_now_failed(self) -> None:
        round_, taken = self._open_round()
        if taken:
            self._finish(round_, taken, (), ClosedError("the store is closed"))

    async def _write_round(self) -> None:
        if not self._scheduled:
            return  # the round asked of this task was started by a flush (pipelined)
        self._scheduled = False
        round_, taken = self._open_round()
        if taken:
            await self._write_taken(round_, taken, self._batches(taken))

    async def _write_taken(
        self, round_: _Round, taken: list[tuple[_SessionTail, list[Row]]], batches: list[Batch]
    ) -> None:
        try:
            # Shielded: closing the store never leaves "did it commit?" unanswerable.
            with anyio.CancelScope(shield=True):
                conflicts = await self._write(batches)
        except Exception as exc:
            self._finish(round_, taken, (), exc)
        else:
            self._finish(round_, taken, conflicts, None)

    def _finish(
        self,
        round_: _Round,
        taken: list[tuple[_SessionTail, list[Row]]],
        conflicts: Collection[str],
        error: BaseException | None,
    ) -> None:
        self._in_flight = None
        pipelined, self._pipelined = self._pipelined, False
        self._last_sizes = (self._last_sizes[1], len(taken))
        try:
            if error is None:
                self._settle(taken, conflicts)
                self._backoff = 0.0
            else:
                round_.error = error
                self._backoff = min(1.0, max(0.05, self._backoff * 2))
                self._requeue(taken)
                logger.warning("eventlog: write round failed, batch kept for retry: %s", error)
            if self._again:
                if pipelined and error is None and self._pipeline_due():
                    # The sessions that committed during the write are written now, while the
                    # ones about to be woken append on the loop: the pipeline goes on. Started
                    # before they are woken: a round written in a task then sends its write
                    # ahead of their appends (the loop runs ready tasks in order).
                    self._start_round()
                else:
                    self._schedule_round()
        finally:
            # Whatever happens, the flushers are woken.
            round_.done.set()

    def _take(self) -> list[tuple[_SessionTail, list[Row]]]:
        """Everything waiting, as rows: rows of a failed round first, then new events."""
        waiting, self.waiting = self.waiting, {}
        taken = []
        for tail in waiting:
            rows, tail.rows = tail.rows, []
            items, tail.queued = tail.queued, []
            if items:
                self._build(tail, items, rows)
            if rows:
                taken.append((tail, rows))
                tail.taken = rows[-1].seq
        return taken

    def _build(self, tail: _SessionTail, items: list[tuple[Event, bytes]], rows: list[Row]) -> None:
        """Turn queued events into ``rows``, continuing the tail's hash chain."""
        built = make_rows(tail.last_hash, items, tail.binding)
        if built:
            rows += built
            tail.last_hash = built[-1].hash
        if len(built) < len(items):
            # Checked here, once per row, so no backend ever sees such a row.
            event = items[len(built)][0]
            self._refuse(tail, event.seq, _unstorable(event), items[len(built) :])

    def _refuse(
        self, tail: _SessionTail, seq: int, why: str, dropped: list[tuple[Event, bytes]]
    ) -> None:
        """Fence ``tail``'s session at a row no store can hold; its rows before it are still
        written."""
        self.pending_bytes -= sum([len(data) for _, data in dropped])
        tail.fence(
            StoreWriteError(
                f"session {tail.session_id!r}, seq {seq}: the event cannot be stored: {why}; "
                f"this session is fenced (events from seq {seq} on are not written)",
                session_id=tail.session_id,
                seq=seq,
                hint="reopen the session to continue from the stored log",
            )
        )

    def _settle(
        self, taken: list[tuple[_SessionTail, list[Row]]], conflicts: Collection[str]
    ) -> None:
        written = 0
        for tail, rows in taken:
            written += sum([len(r.data) for r in rows])
            if conflicts and tail.session_id in conflicts:
                tail.fence(
                    ConflictError(
                        f"session {tail.session_id!r}, seq {rows[0].seq}: another writer "
                        f"advanced the stored log past seq {rows[0].seq - 1}; this session "
                        "is fenced",
                        session_id=tail.session_id,
                        seq=rows[0].seq,
                        hint="reopen the session to continue from the stored log",
                    )
                )
                self.forget(tail)
            elif rows[-1].seq > tail.durable:
                tail.durable = rows[-1].seq
        self.pending_bytes -= written

    def _requeue(self, taken: list[tuple[_SessionTail, list[Row]]]) -> None:
        # The failed rows are written first next round, before anything committed meanwhile.
        waiting = self.waiting
        self.waiting = {}
        for tail, rows in taken:
            tail.rows = rows + tail.rows
            self.waiting[tail] = None
        self.waiting.update(waiting)

    async def aclose(self) -> None:
        """Write what is pending (best effort, shielded) and stop accepting commits."""
        with anyio.CancelScope(shield=True):
            busy = self.waiting or self._in_flight is not None
            if busy and self._task_group is not None:
                await self._next_round_done()
            # A round asked for meanwhile would run in a task the store is about to cancel.
            while (self._scheduled or self._in_flight is not None) and self._task_group:
                await self._next_round_done()
        self.closed = True
        self._task_group = None
