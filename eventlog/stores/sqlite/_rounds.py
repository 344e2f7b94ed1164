"""Where the SQLite backend writes each round: the event loop's thread or the writer thread,
decided in one place (:meth:`Rounds.route`), each with the statements that cost least there
(``_round_sql``).

A round that holds nearly every session written in the last 50 ms (at most one in eight left
out: one agent flushing after its turn, or many agents in step, whose next commits all wait
for this one) is written on the event loop's own thread, when it is small
(``inline_write_bytes``, 256 KiB by default), the writer thread is idle and no other process
holds the write lock: the two thread switches of a hand-off cost a large share of a small
durable commit, the flush callers wait for all of it, and the loop has no other session's
work to overlap with it. The price: the event loop is blocked for that commit, fsync
included (a slow disk's hiccup shows there too). ``python -m benchmarks sqlite`` measures
this route against the thread in the same run ("every round on the writer thread"): it is
kept because it is faster there.

Every other round goes to the writer thread, because there the event loop keeps running
during the commit: other sessions commit meanwhile and share the next round's fsync (group
commit), and the background writer's rounds overlap the app's work. A round that would wait
for another process's write lock goes to the thread too, so the loop never waits for
``busy_timeout``. ``inline_write_bytes=0`` sends every round to the thread. The store's
pipelined rounds (many sessions flushing in step, :meth:`Rounds.start`) always go to the
thread: the loop runs the other half's appends meanwhile.

Known limit of the thread: it needs the GIL to start a round and to finish it, and while the
event loop is busy with Python work it rarely gets it (the loop releases the GIL at every poll
and takes it straight back, so the waiting thread never asks for a forced switch). A round
there is one statement, so it needs the GIL twice, not once per statement, and a pipelined
round is handed off (``SQLiteWorker.submit(hand_off=True)``: the loop waits until the thread
is inside SQLite, then runs the other half's appends). A round the writer awaits is not: the
hand-off made a lone flush through the thread slower (p50 in ``python -m benchmarks sqlite``,
"every round on the writer thread"). Such a round is late, never lost, and a flush waits for
it like for any other.

The figures behind these choices are in ``benchmarks/SQLITE.md`` and ``benchmarks/MANY.md``.
"""

from __future__ import annotations

import enum
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Sequence

from .._batch import Batch, WriteDone
from ._errors import translated
from ._round_sql import Packed, pack, write_round, write_round_here
from ._transaction import WriteLockBusy
from ._worker import SQLiteWorker

__all__ = ("Route", "Rounds")

#: Seconds since its last write during which another session counts as active (its commits
#: would join the next round, so a round is not written on the loop's thread then).
_ACTIVE_WINDOW = 0.05
#: A round is written on the loop's thread while at most one active session in this many is
#: left out of it (see :meth:`Rounds.route`).
_LEFT_OUT_RATIO = 8


class Route(enum.Enum):
    """Where a round is written."""

    LOOP = "the event loop's thread"
    THREAD = "the writer thread"


def _payload_bytes(batches: Sequence[Batch]) -> int:
    return sum([len(row.data) for batch in batches for row in batch.rows])


class Rounds:
    """The write rounds of one SQLite store.

    :param path: the database file (for messages).
    :param worker: the writer connection's thread.
    :param held: the owner token of each lease the store holds (read, never changed here).
    :param busy_timeout_ms: how long a round on the thread waits for another process's lock.
    :param inline_write_bytes: the largest round written on the loop's thread (``0``: none).
    :param written: called on the loop's thread after each round that committed.
    """

    def __init__(
        self,
        path: str,
        worker: SQLiteWorker,
        held: dict[str, str],
        *,
        busy_timeout_ms: int,
        inline_write_bytes: int,
        written: Callable[[], None],
    ) -> None:
        self._path = path
        self._worker = worker
        self._held = held
        self._busy_timeout_ms = busy_timeout_ms
        self._inline_write_bytes = inline_write_bytes
        self._written = written
        # When each session was last written (see `route`).
        self._recent: OrderedDict[str, float] = OrderedDict()

    def route(self, batches: Sequence[Batch]) -> Route:
        """Where a round the store's writer awaits is written (see the module's docstring):
        on the loop's thread when it holds (nearly) every session written during the last
        ``_ACTIVE_WINDOW`` (a lone agent, or many in step: only sessions left out of it have
        work the loop could do while the thread commits), is small and the thread is idle.
        Notes its sessions as written."""
        ids = {b.session_id for b in batches}
        left_out = self._note_written(ids)
        if left_out * _LEFT_OUT_RATIO > len(ids) or not self._worker.idle:
            return Route.THREAD
        return Route.LOOP if _payload_bytes(batches) <= self._inline_write_bytes else Route.THREAD

    async def write(self, batches: Sequence[Batch]) -> Collection[str]:
        """Write a round where :meth:`route` says (a round on the loop's thread that finds
        another process's write lock taken goes to the thread, to wait there)."""
        if self.route(batches) is Route.LOOP:
            try:
                with translated(self._path, "writing events", write=True):
                    conflicts = self._worker.run_here(self._write_here, batches)
            except WriteLockBusy:
                pass
            else:
                self._written()
                return conflicts
        # The thread reads its own copy of the owners while the loop may take or release
        # leases, and gets the round's statement parameters ready-made (see `pack`).
        owners = self._owners_of(batches)
        conflicts = await self._worker.call(
            self._write_there, batches, owners, pack(batches, owners)
        )
        self._written()
        return conflicts

    def start(self, batches: Sequence[Batch], done: WriteDone) -> None:
        """Start a pipelined round on the writer thread now; ``done`` gets the conflicts or
        the (translated) error on the event loop's thread.

        :raises ClosedError: the writer thread is closed (nothing was started).
        """
        self._note_written(b.session_id for b in batches)
        owners = self._owners_of(batches)

        def finished(result: Collection[str] | None, error: BaseException | None) -> None:
            if error is None:
                self._written()
            done(result or (), error)

        self._worker.submit(
            finished, self._write_there, batches, owners, pack(batches, owners), hand_off=True
        )

    def _write_here(self, connection: sqlite3.Connection, batches: Sequence[Batch]) -> list[str]:
        """A round on the loop's thread: never waits for another process's write lock."""
        return write_round_here(connection, batches, self._held)

    def _write_there(
        self,
        connection: sqlite3.Connection,
        batches: Sequence[Batch],
        owners: dict[str, str],
        packed: Packed,
    ) -> list[str]:
        """A round on the writer thread: waits up to ``busy_timeout`` for the write lock."""
        with translated(self._path, "writing events", write=True):
            return write_round(connection, batches, owners, packed, self._busy_timeout_ms)

    def _owners_of(self, batches: Sequence[Batch]) -> dict[str, str]:
        return {b.session_id: self._held.get(b.session_id, "") for b in batches}

    def _note_written(self, session_ids: Iterable[str]) -> int:
        """Note these sessions as written now, in the window of recently written sessions
        :meth:`route` reads; return how many others the window holds."""
        now = time.monotonic()
        recent = self._recent
        # Oldest first (each session written moves to the end), so the stale ones are a prefix:
        # a round costs its own sessions and those that went stale, not every recent one.
        while recent:
            seen = recent[next(iter(recent))]
            if now - seen <= _ACTIVE_WINDOW:
                break
            recent.popitem(last=False)
        ids = session_ids if isinstance(session_ids, set) else set(session_ids)
        left_out = len(recent) - sum([1 for sid in ids if sid in recent])
        for sid in ids:
            recent[sid] = now
            recent.move_to_end(sid)
        return left_out
