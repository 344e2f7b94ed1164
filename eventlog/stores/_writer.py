"""The store-side write queue: group commit across sessions, the flush barrier.

Committed rows wait here until a write round writes them. One round takes everything pending
for every session and hands it to the store in one call (one transaction). Rounds run one after
another, so a flush that waits for the round that starts after its call is guaranteed to cover
every event committed before the call.

Each writable session has one :class:`~eventlog.stores._tail.Tail`, owned by the writer: its
durable seq, the hash chain's head and binding, the error that fenced it and its rows not yet
written. The session reads its watermarks through the tail's narrow interface
(:class:`eventlog._session.SessionTail`) and never changes them.

Failure keeps the batch at the front of the queue: nothing committed is dropped, ``flush()``
raises :class:`StoreWriteError` and the next round retries. A conflict (the stored tail moved
under a session) fences that session only; the other sessions of the round are still written.

A row no store can hold (an integer column outside 64 bits: SQLite would fail the whole round
or store it as REAL, PostgreSQL would fail the round) never reaches a backend: its session's
rows before it are written with the round, and the session is fenced with a
:class:`StoreWriteError` naming the seq; the other sessions of the round are not affected.

The rounds are a state machine (:class:`~eventlog.stores._round_state.RoundState`); every
transition is listed in :data:`~eventlog.stores._round_state.TRANSITIONS` and made by
:meth:`Writer._move`, and every round that was started ends in :meth:`Writer._round_ended`,
whichever way its write was carried.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Sequence
from functools import partial

import anyio
from anyio.abc import TaskGroup, TaskStatus

from .._codec import Row
from .._errors import BacklogFullError, ClosedError, StoreWriteError
from .._event import Event
from ._abilities import Pipeline
from ._batch import Batch, StartWrite, WriteDone, WriteFunction
from ._round_state import TRANSITIONS, Round, RoundState
from ._tail import Tail

__all__ = ("Writer",)

logger = logging.getLogger("eventlog.writer")

#: A round is started at once, from the flush that asks for it, when this many sessions or
#: more are queued and they are at least half of the larger of the last two rounds (see
#: :meth:`Writer._pipeline_due`).
_PIPELINE_FROM = 16

_Taken = list[tuple[Tail, list[Row]]]
# The states as module constants: an enum member looked up through its class costs about
# 0.1 µs, and the writer reads them several times per round.
_NEW, _IDLE, _ASKED, _WRITING, _WRITING_ASKED, _CLOSED = RoundState


class Writer:
    """The queue and the write rounds of one store.

    A round takes everything pending and starts its write at once, from whichever task asks
    (a flush, or the background writer after ``write_delay``); rounds never overlap, and a round
    asked for while one is in flight starts the moment that one ends. The write runs in a task
    of the store's task group (one task writes every round), shielded, so a cancelled flush
    caller never cancels or waits for a write, and closing the store never leaves "did it
    commit?" unanswerable.

    With a pipeline (``pipeline`` other than :attr:`Pipeline.NONE`: a backend that writes on a
    thread of its own, or whose write waits on a database server), many sessions flushing in
    step are written as two alternating rounds: when the sessions queued reach half of those
    the last two rounds wrote, the flush that brings them there starts their round at once (on
    the backend's thread, or in a task of its own), and the others' appends run on the event
    loop meanwhile; a round that ends with sessions queued starts the next at once too, before
    its flushers are woken. One round for everyone would leave the loop idle during each
    commit and the disk idle during the appends.

    :param write: the store's batch write (see :data:`~eventlog.stores._batch.WriteFunction`).
    :param start: the same write started on the backend's thread (see
        :data:`~eventlog.stores._batch.StartWrite`); used by :attr:`Pipeline.THREAD` only.
    :param pipeline: how many sessions flushing in step are written (the backend's
        :class:`~eventlog.stores.BackendAbilities`).
    :param write_delay: seconds the background writer waits for more events before a round.
    :param max_pending_bytes: committed-but-unwritten bytes allowed before ``append`` refuses.
    :raises ValueError: :attr:`Pipeline.THREAD` without ``start``.
    """

    def __init__(
        self,
        write: WriteFunction,
        *,
        start: StartWrite | None = None,
        pipeline: Pipeline = Pipeline.NONE,
        write_delay: float = 0.010,
        max_pending_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        if pipeline is Pipeline.THREAD and start is None:
            raise ValueError("a writer pipelined on the backend's thread needs its start_write")
        self._write = write
        self._start = start
        self._pipeline = pipeline
        self._state = _NEW
        #: Whether the state is CLOSED (kept by ``_move``; read on every commit, where an
        #: attribute costs less than comparing the state).
        self.closed = False
        # Sessions written by the last two rounds (what a pipelined round is measured against).
        self._last_sizes = (0, 0)
        self._write_delay = write_delay
        self.max_pending_bytes = max_pending_bytes
        self.pending_bytes = 0
        #: The tails with queued events or rows, in queueing order (a dict as an ordered set).
        self.waiting: dict[Tail, None] = {}
        self._next_round = Round()
        # The round whose write is in flight (states WRITING and WRITING_ASKED). Rounds never
        # overlap: a batch's expected head is the durable seq of the round before.
        self._in_flight: Round | None = None
        self._round_wanted = anyio.Event()
        self._wake = anyio.Event()
        #: Whether ``_wake`` is set (read on every commit: cheaper than asking the event).
        self.woken = False
        # When the oldest event not yet taken by a round was queued (``time.monotonic``).
        self._since = 0.0
        # Seconds added to the background writer's delay after failed rounds.
        self._backoff = 0.0
        self._task_group: TaskGroup | None = None
        self._new_event: Callable[[], anyio.Event] = anyio.Event

    @property
    def state(self) -> RoundState:
        """Where the rounds stand."""
        return self._state

    def _move(self, to: RoundState) -> None:
        """Make the transition to ``to`` (one of :data:`TRANSITIONS`, or staying put)."""
        if to is not self._state:
            assert (self._state, to) in TRANSITIONS, f"writer: {self._state} -> {to}"
            self._state = to
            self.closed = to is _CLOSED

    def tail(self, session_id: str, last_hash: bytes, durable: int) -> Tail:
        """The writer's tail for a writable session whose log is durable up to ``durable``, at
        chain hash ``last_hash``."""
        return Tail(self, session_id, last_hash, durable)

    # -- commit side (synchronous, called through a session's tail) ----------------------------

    def check_room(self, session_id: str, seq: int, nbytes: int, waiting: int = 0) -> None:
        """Refuse a commit that would grow the backlog past ``max_pending_bytes`` (once
        ``waiting`` more bytes are committed before it).

        :raises ClosedError: the store is closed.
        :raises BacklogFullError: too many bytes wait to be written.
        """
        pending = self.pending_bytes + waiting
        if self.closed:
            raise ClosedError(f"session {session_id!r}: the store is closed", session_id=session_id)
        if pending and pending + nbytes > self.max_pending_bytes:
            raise BacklogFullError(
                f"session {session_id!r}, seq {seq}: {pending} bytes "
                f"{'would be' if waiting else 'are'} waiting to be written "
                f"(limit {self.max_pending_bytes})",
                session_id=session_id,
                seq=seq,
                hint="the store is not keeping up or is failing; flush() shows why",
            )

    def enqueue(self, tail: Tail, event: Event, data: bytes) -> None:
        """Queue ``tail``'s committed event and its payload bytes (and wake the background
        writer)."""
        if not tail.queued and not tail.rows:
            self.waiting[tail] = None
        tail.queued.append((event, data))
        self.pending_bytes += len(data)
        if not self.woken:
            self.wake()

    def wake(self) -> None:
        """Wake the background writer: the first event since its last round was queued."""
        self.woken = True
        self._since = time.monotonic()
        self._wake.set()

    def forget(self, tail: Tail) -> None:
        """Drop a session's unwritten events (it was fenced or closed)."""
        self.waiting.pop(tail, None)
        self.pending_bytes -= tail.drop()

    # -- flush side ----------------------------------------------------------------------------

    async def flush(self, tail: Tail, target: int) -> None:
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
                tail.raise_if_fenced()
            if self._state is _NEW or self._state is _CLOSED:
                raise ClosedError(
                    f"session {tail.session_id!r}: the store is closed", session_id=tail.session_id
                )
            round_ = self._in_flight
            if round_ is None or tail.taken < target:
                round_ = self._ask_for_round()
            await round_.done.wait()
            if tail.fault is not None:
                tail.raise_if_fenced()
            if round_.error is not None and tail.durable < target:
                raise StoreWriteError(
                    f"session {tail.session_id!r}: writing seqs {tail.durable + 1}..{target} "
                    f"failed: {round_.error}",
                    session_id=tail.session_id,
                    seq=tail.durable + 1,
                    hint="the events stay queued; the next flush retries",
                ) from round_.error

    # -- the tasks -----------------------------------------------------------------------------

    async def start(self, task_group: TaskGroup) -> None:
        """Start the writer's tasks inside the store's task group."""
        self._task_group = task_group
        # The event loop's own event class, taken here, in a task. ``anyio.Event()`` finds the
        # running library through the current task, so one made in a plain callback (a round
        # opened when the writer thread's answer arrives) is an adapter that finds it on every
        # wait instead: an extra frame and a library lookup for every flusher of the round.
        self._new_event = type(anyio.Event())
        self._move(_IDLE)
        await task_group.start(self.run)
        await task_group.start(self._rounds)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The background writer; started by :meth:`start`."""
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

    async def _rounds(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The task that writes the rounds asked of it, one after another (waking it costs
        less than starting a task per round)."""
        task_status.started()
        while True:
            await self._round_wanted.wait()
            self._round_wanted = self._new_event()
            if self._state is _ASKED:  # else a flush started it (pipelined)
                round_, taken = self._begin()
                if taken:
                    await self._write_taken(self._batches(taken), self._ender(round_, taken))

    async def aclose(self) -> None:
        """Write what is pending (best effort, shielded) and stop accepting commits.
        Idempotent."""
        if self._state is _CLOSED:
            return
        with anyio.CancelScope(shield=True):
            if self._state is not _NEW:
                if self.waiting or self._in_flight is not None:
                    await self._next_round_done()
                # A round asked for meanwhile would run in a task the store is about to cancel.
                while self._state is not _IDLE:
                    await self._next_round_done()
            self._move(_CLOSED)
        self._task_group = None

    # -- asking for and starting rounds --------------------------------------------------------

    async def _next_round_done(self) -> Round:
        """Ask for the next round and return it once it finished."""
        round_ = self._ask_for_round()
        await round_.done.wait()
        return round_

    def _ask_for_round(self) -> Round:
        """Ask for the next round (after the one in flight, if any) and return it."""
        state = self._state
        if state is _WRITING:
            self._move(_WRITING_ASKED)
        elif state is _WRITING_ASKED:
            pass
        elif state is _NEW or state is _CLOSED:
            return self._fail_at_once()
        elif self._pipeline is not Pipeline.NONE and self._pipeline_due():
            # Started here, not by the rounds task (which then finds nothing asked of it).
            return self._start_round()
        elif state is _IDLE:
            self._ask_rounds_task()
        # else (ASKED): the rounds task takes everything queued when it runs.
        return self._next_round

    def _ask_rounds_task(self) -> None:
        """Ask the rounds task (of the store's task group: a cancelled flush caller neither
        cancels nor waits for the write) for the next round. The round takes what is queued
        when that task runs, not now: the flushers woken by the round before (ready to run,
        ahead of it) commit and join it first, instead of each cohort splitting into a round
        of one flusher and a round of all the others."""
        self._move(_ASKED)
        self._round_wanted.set()

    def _pipeline_due(self) -> bool:
        """Whether the sessions queued are many, and at least half of the larger of the last two
        rounds: then their round starts now and the rest of the sessions in step share the
        next."""
        queued = len(self.waiting)
        return queued >= _PIPELINE_FROM and 2 * queued >= max(self._last_sizes) > 0

    def _start_round(self) -> Round:
        """Take everything queued and start its write now, on the backend's thread or in a task
        of its own; return the round (the one in flight, or one done at once when nothing was
        queued)."""
        round_, taken = self._begin()
        if not taken:
            return round_
        round_.pipelined = True
        batches = self._batches(taken)
        done = self._ender(round_, taken)
        try:
            if self._pipeline is Pipeline.THREAD:
                assert self._start is not None  # checked when built
                self._start(batches, done)
            else:
                assert self._task_group is not None  # not NEW nor CLOSED
                self._task_group.start_soon(self._write_taken, batches, done)
        except Exception as exc:  # nothing was started: the rows go back to the queue
            done((), exc)
        return round_

    def _open(self) -> tuple[Round, _Taken]:
        """Make the next round current with everything queued, as rows (rows of a failed round
        first, then new events); with nothing queued it is done at once."""
        round_, self._next_round = self._next_round, Round(self._new_event)
        waiting, self.waiting = self.waiting, {}
        taken = []
        for tail in waiting:
            rows, refused = tail.take()
            self.pending_bytes -= refused
            if rows:
                taken.append((tail, rows))
        if not taken:
            round_.done.set()
        return round_, taken

    def _begin(self) -> tuple[Round, _Taken]:
        """Open the next round (see :meth:`_open`): in flight, or, with nothing queued, done
        and the writer idle."""
        round_, taken = self._open()
        if taken:
            self._move(_WRITING)
            self._in_flight = round_
        else:
            self._move(_IDLE)
        return round_, taken

    @staticmethod
    def _batches(taken: _Taken) -> list[Batch]:
        return [Batch(tail.session_id, tail.durable, rows) for tail, rows in taken]

    async def _write_taken(self, batches: Sequence[Batch], done: WriteDone) -> None:
        """Write a round awaiting the store's write (in the rounds task or a task of its
        own); report how it ended to ``done``."""
        try:
            # Shielded: closing the store never leaves "did it commit?" unanswerable.
            with anyio.CancelScope(shield=True):
                conflicts = await self._write(batches)
        except Exception as exc:
            done((), exc)
        else:
            done(conflicts, None)

    def _fail_at_once(self) -> Round:
        """The writer is not running: the next round fails at once with everything queued
        (kept for a retry that will not come: ``flush`` says the store is closed)."""
        round_, taken = self._open()
        if taken:
            self._outcome(round_, taken, (), ClosedError("the store is closed"))
            round_.done.set()
        return round_

    # -- the end of a round --------------------------------------------------------------------

    def _ender(self, round_: Round, taken: _Taken) -> WriteDone:
        """The one way a started round ends (see :meth:`_round_ended`)."""
        return partial(self._round_ended, round_, taken)

    def _round_ended(
        self,
        round_: Round,
        taken: _Taken,
        conflicts: Collection[str],
        error: BaseException | None,
    ) -> None:
        """A round's write ended: settle its sessions, move the state on (starting the next
        round when one was asked for meanwhile) and wake its flushers. Called on the event
        loop's thread, from the task that awaited the write or from the backend's answer."""
        again = self._state is _WRITING_ASKED
        self._in_flight = None
        self._move(_IDLE)
        self._last_sizes = (self._last_sizes[1], len(taken))
        try:
            self._outcome(round_, taken, conflicts if error is None else (), error)
            if again:
                if round_.pipelined and error is None and self._pipeline_due():
                    # The sessions that committed during the write are written now, while the
                    # ones about to be woken append on the loop: the pipeline goes on. Started
                    # before they are woken: a round written in a task then sends its write
                    # ahead of their appends (the loop runs ready tasks in order).
                    self._start_round()
                else:
                    self._ask_rounds_task()
        finally:
            # Whatever happens, the flushers are woken.
            round_.done.set()

    def _outcome(
        self,
        round_: Round,
        taken: _Taken,
        conflicts: Collection[str],
        error: BaseException | None,
    ) -> None:
        """Settle the sessions of a round: written or fenced, or (``error``) queued again."""
        if error is None:
            written = 0
            for tail, rows in taken:
                written += sum([len(r.data) for r in rows])
                if conflicts and tail.session_id in conflicts:
                    tail.conflicted(rows)
                    self.forget(tail)
                else:
                    tail.written(rows)
            self.pending_bytes -= written
            self._backoff = 0.0
            return
        round_.error = error
        self._backoff = min(1.0, max(0.05, self._backoff * 2))
        # The failed rows are written first next round, before anything committed meanwhile.
        waiting, self.waiting = self.waiting, {}
        for tail, rows in taken:
            tail.rows = rows + tail.rows
            self.waiting[tail] = None
        self.waiting.update(waiting)
        logger.warning("eventlog: write round failed, batch kept for retry: %s", error)
