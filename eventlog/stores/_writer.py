"""The store-side write queue: group commit across sessions, the flush barrier.

Committed rows wait here until the single writer task writes them. One round of the writer takes
everything pending for every session and hands it to the store in one call (one transaction).
Rounds run one after another, so a flush that waits for the round that starts after its call is
guaranteed to cover every event committed before the call.

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
from collections.abc import Awaitable, Callable, Collection, Sequence
from functools import partial
from typing import TYPE_CHECKING, NamedTuple

import anyio
from anyio.abc import TaskGroup, TaskStatus

from .._codec import Row, make_row
from .._errors import BacklogFullError, ClosedError, ConflictError, StoreWriteError
from .._event import Event

if TYPE_CHECKING:
    from .._session import Session

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
#: ``on_done(conflicts, error)``: how a started write reports back, on the event loop's thread.
WriteDone = Callable[[Collection[str], BaseException | None], None]
#: ``start_write(batches, on_done, lone_flush)`` queues the same write without awaiting it;
#: ``on_done`` is called once it ended (see :class:`Writer`). ``lone_flush`` says a flush waits
#: for this round and no other session committed lately: writing it at once, even blocking the
#: event loop, then delays no one else's commit and takes nothing from group commit.
StartWrite = Callable[[Sequence[Batch], WriteDone, bool], None]

#: Seconds since its last commit during which another session counts as active (its commits
#: would join the next round, so a round is not written in place then).
_ACTIVE_WINDOW = 0.05
#: The range of the stores' integer columns (SQLite INTEGER, PostgreSQL bigint).
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _unstorable(row: Row) -> str:
    """Why a store cannot hold ``row`` exactly (one of its integer columns is out of range)."""
    for name, value in (("seq", row.seq), ("time", row.time)):
        if type(value) is not int or not _INT64_MIN <= value <= _INT64_MAX:
            return f"{name} {value!r} is not a 64-bit integer"
    return "an integer column is out of range"


class _Round:
    """One write round; flush callers wait for it to finish."""

    __slots__ = ("done", "error", "waited")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.error: BaseException | None = None
        self.waited = False  # a flush (or close) waits for this round


class Writer:
    """The queue and the write rounds of one store.

    A round takes everything pending and starts its write at once, from whichever task asks
    (a flush, or the background writer after ``write_delay``); rounds never overlap, and a round
    asked for while one is in flight starts the moment that one ends. The round finishes in a
    callback, not in the asking task, so a cancelled flush caller never cancels or waits for a
    write. When the store's backend offers ``start_write`` (:data:`StartWrite`; the SQLite
    backend does) a round costs no task switch at all: the flush caller queues the write and
    the completion callback settles it and wakes the caller. Otherwise the write coroutine runs
    in a task of the store's task group.

    :param write: the store's batch write (see :data:`WriteFunction`).
    :param start_write: the same write started without awaiting it (:data:`StartWrite`), when
        the backend offers one; used instead of ``write``.
    :param write_delay: seconds the background writer waits for more events before a round.
    :param max_pending_bytes: committed-but-unwritten bytes allowed before ``append`` refuses.
    """

    def __init__(
        self,
        write: WriteFunction,
        *,
        start_write: StartWrite | None = None,
        write_delay: float = 0.010,
        max_pending_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        self._write = write
        self._start_write = start_write
        self._write_delay = write_delay
        self.max_pending_bytes = max_pending_bytes
        self.pending_bytes = 0
        # Committed events not yet turned into rows, and rows built by a round that failed
        # (written first next time). Rows are built here, not at commit, so the hash chain
        # costs the writer, not ``append``.
        self._pending: dict[Session, list[tuple[Event, bytes]]] = {}
        self._built: dict[Session, list[Row]] = {}
        # When each session was last in a round (see `_alone`).
        self._recent: dict[Session, float] = {}
        self._next_round = _Round()
        # The round whose write is in flight, and whether another was asked for meanwhile.
        # Rounds never overlap: a batch's expected head is the durable seq of the round before.
        self._in_flight: _Round | None = None
        self._again = False
        self._wake = anyio.Event()
        # When the oldest event not yet taken by a round was queued (``time.monotonic``).
        self._since = 0.0
        self._closed = False
        # After a failed round the background writer waits longer before retrying on its own
        # (a flush still retries at once), so a failing disk is not hammered every 10 ms.
        self._backoff = 0.0
        self._task_group: TaskGroup | None = None

    # -- commit side (synchronous, called from Session.append) ---------------------------------

    def check_room(self, session: Session, nbytes: int) -> None:
        """Refuse a commit that would grow the backlog past ``max_pending_bytes``."""
        if self._closed:
            raise ClosedError(f"session {session.id!r}: the store is closed", session_id=session.id)
        if self.pending_bytes and self.pending_bytes + nbytes > self.max_pending_bytes:
            raise BacklogFullError(
                f"session {session.id!r}, seq {session.head + 1}: {self.pending_bytes} bytes "
                f"are waiting to be written (limit {self.max_pending_bytes})",
                session_id=session.id,
                seq=session.head + 1,
                hint="the store is not keeping up or is failing; flush() shows why",
            )

    def enqueue(self, session: Session, event: Event, data: bytes) -> None:
        """Queue a committed event and its payload bytes; written after ``write_delay``."""
        items = self._pending.get(session)
        if items is None:
            self._pending[session] = [(event, data)]
        else:
            items.append((event, data))
        self.pending_bytes += len(data)
        if not self._wake.is_set():
            self._since = time.monotonic()
            self._wake.set()

    # -- flush side ----------------------------------------------------------------------------

    async def flush(self, session: Session) -> None:
        """Return when every event ``session`` committed before the call is durable.

        :raises StoreWriteError: the round that should have written them failed.
        :raises ConflictError: the session was fenced.
        """
        target = session.head
        while session.durable < target:
            session.raise_if_fenced()
            if self._task_group is None:
                raise ClosedError(
                    f"session {session.id!r}: the store is closed", session_id=session.id
                )
            # The next round starts after this call, so it covers everything committed before.
            round_ = await self._next_round_done(waited=True)
            session.raise_if_fenced()
            if round_.error is not None and session.durable < target:
                raise StoreWriteError(
                    f"session {session.id!r}: writing seqs {session.durable + 1}..{target} "
                    f"failed: {round_.error}",
                    session_id=session.id,
                    seq=session.durable + 1,
                    hint="the events stay queued; the next flush retries",
                ) from round_.error

    def forget(self, session: Session) -> None:
        """Drop a session's unwritten events (it was fenced or closed)."""
        items = self._pending.pop(session, [])
        rows = self._built.pop(session, [])
        self._recent.pop(session, None)
        self.pending_bytes -= sum(len(data) for _, data in items)
        self.pending_bytes -= sum(len(row.data) for row in rows)

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
            self._wake = anyio.Event()
            await self._next_round_done(waited=False)

    async def start(self, task_group: TaskGroup) -> None:
        """Start the writer task inside the store's task group."""
        self._task_group = task_group
        await task_group.start(self.run)

    async def _next_round_done(self, *, waited: bool) -> _Round:
        """Ask for the next round and return it once it finished (``waited``: the caller is a
        flush or a close, waiting for durability, not the background writer)."""
        round_ = self._next_round
        round_.waited = round_.waited or waited
        self._request_round()
        # Also when a backend wrote the round in place already: this still yields once, so a
        # session flushing after every turn lets the app's other tasks run.
        await round_.done.wait()
        return round_

    def _request_round(self) -> None:
        """Start the next round now, or as soon as the one in flight ends."""
        if self._in_flight is None:
            self._start_round()
        else:
            self._again = True

    def _start_round(self) -> None:
        round_, self._next_round = self._next_round, _Round()
        self._again = False
        taken = self._take()
        if not taken:
            round_.done.set()
            return
        batches = [Batch(s.id, s.durable, rows) for s, rows in taken.items()]
        self._in_flight = round_
        lone_flush = self._alone(taken) and round_.waited
        if self._start_write is not None:
            try:
                self._start_write(batches, partial(self._finish, round_, taken), lone_flush)
            except Exception as exc:
                self._finish(round_, taken, (), exc)
        elif self._task_group is None:  # closed while this round waited for the one before
            self._finish(round_, taken, (), ClosedError("the store is closed"))
        else:
            self._task_group.start_soon(self._await_write, round_, taken, batches)

    async def _await_write(
        self,
        round_: _Round,
        taken: dict[Session, list[Row]],
        batches: Sequence[Batch],
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
        taken: dict[Session, list[Row]],
        conflicts: Collection[str],
        error: BaseException | None,
    ) -> None:
        self._in_flight = None
        try:
            if error is None:
                self._settle(taken, conflicts)
                self._backoff = 0.0
            else:
                round_.error = error
                self._backoff = min(1.0, max(0.05, self._backoff * 2))
                self._requeue(taken)
                logger.warning("eventlog: write round failed, batch kept for retry: %s", error)
        finally:
            # Runs in a callback where nothing would report an exception to the flushers:
            # whatever happens, they are woken.
            round_.done.set()
        if self._again:
            self._start_round()

    def _alone(self, taken: dict[Session, list[Row]]) -> bool:
        """Whether no session but this round's had events in a round during the last
        ``_ACTIVE_WINDOW`` (such a session is likely to commit again soon and could share the
        next round)."""
        now = time.monotonic()
        alone = True
        for session, seen in list(self._recent.items()):
            if now - seen > _ACTIVE_WINDOW:
                del self._recent[session]
            elif session not in taken:
                alone = False
        for session in taken:
            self._recent[session] = now
        return alone

    def _take(self) -> dict[Session, list[Row]]:
        """Everything waiting, as rows: rows of a failed round first, then new events."""
        taken, self._built = self._built, {}
        pending, self._pending = self._pending, {}
        for session, items in pending.items():
            prev, bound = session.chain_hash, session.chain_binding
            rows = taken.setdefault(session, [])
            for i, (event, data) in enumerate(items):
                row = make_row(
                    prev,
                    event.seq,
                    event.type,
                    event.time,
                    event.surface,
                    event.sources,
                    event.ignorable,
                    data,
                    bound,
                )
                # Checked here, once per row, so no backend ever sees such a row.
                seq, stamp = row.seq, row.time
                if (
                    type(seq) is not int
                    or type(stamp) is not int
                    or not _INT64_MIN <= seq <= _INT64_MAX
                    or not _INT64_MIN <= stamp <= _INT64_MAX
                ):
                    self._refuse(session, row, _unstorable(row), items[i:])
                    break
                rows.append(row)
                prev = row.hash
            session.chain_hash = prev
            if not rows:
                del taken[session]
        return taken

    def _refuse(
        self, session: Session, row: Row, why: str, dropped: list[tuple[Event, bytes]]
    ) -> None:
        """Fence ``session`` at a row no store can hold; its rows before it are still written."""
        self.pending_bytes -= sum(len(data) for _, data in dropped)
        session.fence(
            StoreWriteError(
                f"session {session.id!r}, seq {row.seq}: the event cannot be stored: {why}; "
                f"this session is fenced (events from seq {row.seq} on are not written)",
                session_id=session.id,
                seq=row.seq,
                hint="reopen the session to continue from the stored log",
            )
        )

    def _settle(self, taken: dict[Session, list[Row]], conflicts: Collection[str]) -> None:
        for session, rows in taken.items():
            self.pending_bytes -= sum(len(r.data) for r in rows)
            if session.id in conflicts:
                session.fence(
                    ConflictError(
                        f"session {session.id!r}, seq {rows[0].seq}: another writer advanced "
                        f"the stored log past seq {rows[0].seq - 1}; this session is fenced",
                        session_id=session.id,
                        seq=rows[0].seq,
                        hint="reopen the session to continue from the stored log",
                    )
                )
                self.forget(session)
            else:
                session.mark_durable(rows[-1].seq)

    def _requeue(self, taken: dict[Session, list[Row]]) -> None:
        # The failed rows are written first next round, before anything committed meanwhile.
        self._built = taken

    async def aclose(self) -> None:
        """Write what is pending (best effort, shielded) and stop accepting commits."""
        with anyio.CancelScope(shield=True):
            busy = self._pending or self._built or self._in_flight is not None
            if busy and self._task_group is not None:
                await self._next_round_done(waited=True)
        self._closed = True
        self._task_group = None
