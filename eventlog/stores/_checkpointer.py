"""The checkpointer: one store's snapshots, from when one is due to trimming at it.

It owns, for every session of its store: when the next snapshot is due (a
:class:`~eventlog._session_ports.Checkpoint` hook per writable session, the session's one hook
for snapshots), the rows kept for that snapshot (so it encodes no payload again), capturing and
writing snapshots in the background, reading the stored snapshot an ``open`` starts from, with
the projection states it carries, and dropping from a live session's memory the events a
snapshot covers (docs/stores.md, "Snapshots" and "A long-lived session").
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence

import anyio
from anyio.abc import TaskGroup

from .._codec import Row
from .._registry import EventTypes
from .._session import Session
from .._session_ports import StoredEvents
from .._snapshot_state import CachedState, SnapshotState
from ._base import Backend, Snapshots
from ._batch import Batch, StartWrite, WriteDone, WriteFunction
from ._snapshot_check import usable_snapshot
from ._snapshots import Restored, encode_snapshot, keep_surface_rows
from ._trim import trim_window

__all__ = ("Checkpointer",)

logger = logging.getLogger("eventlog.store")


class _Schedule:
    """One writable session's snapshots (:class:`~eventlog._session_ports.Checkpoint`)."""

    __slots__ = ("_owner", "_trim_every", "due", "rows")

    def __init__(self, owner: Checkpointer, head: int, rows: dict[int, Row], whole: bool) -> None:
        self._owner = owner
        self.due = head + owner.every
        # The rows of its last snapshot and of the surface events written since.
        self.rows = rows
        # A snapshot drops the events it covers once this many have gathered; 0: never (a
        # session asked to hold its whole log, or a store with trimming off).
        self._trim_every = 0 if whole else owner.trim_every

    @property
    def trims(self) -> bool:
        return self._trim_every > 0

    def replaced(self, seq: int) -> None:
        self.due = seq

    def keep_whole(self) -> None:
        self._trim_every = 0

    def flushed(self, session: Session) -> None:
        # At least as many events as the surface has nodes until the next one: a snapshot
        # holds the surface, so this keeps what snapshots write within what the log writes.
        surface = len(session.surface_index)
        self.due = session.head + max(self._owner.every, surface)
        if (session.surface_index.generation == 0 and surface) or 2 * surface > session.head + 1:
            # A session that has never compacted (no surface Replace yet), or whose surface
            # holds more than half its events: its messages are most of its log's bytes, so a
            # snapshot would be a second copy of the log (twice the file), and an open from it
            # would hold both copies at once; a replay reads the log once. Not worth one.
            # A session with an empty surface (an app's own events only: a LangGraph thread)
            # is the opposite case: its snapshot is a few hundred bytes.
            return
        try:
            self._owner.capture(session, self)
        except Exception:
            logger.exception("eventlog: session %r: taking a snapshot failed", session.id)
            return
        if self._trim_every:
            trim_window(session, session.head, self._trim_every, self._owner.states)


class Checkpointer:
    """The snapshots of one store's sessions.

    :param backend: the store's backend; without :class:`Snapshots`, snapshots are off.
    :param types: the store's event types (to decode a stored snapshot's events).
    :param every: a snapshot at most every this many flushed events (0: off).
    :param trim_every: a live session drops the events a snapshot covers once this many have
        gathered (0: never).
    :param states: the projection states a snapshot carries (see :mod:`._states`).
    :param sessions: the store's sessions open for writing, by id (read, never changed).
    """

    def __init__(
        self,
        backend: Backend,
        types: EventTypes,
        *,
        every: int,
        trim_every: int,
        states: tuple[SnapshotState, ...],
        sessions: Mapping[str, Session],
    ) -> None:
        self.backend = backend
        self.types = types
        self.every = every if isinstance(backend, Snapshots) else 0
        self.trim_every = trim_every
        self.states = states
        self._sessions = sessions
        self._schedules: dict[str, _Schedule] = {}
        # Snapshot writes in flight (closing waits for them: each is a few milliseconds).
        self._writes: set[str] = set()
        self._idle = anyio.Event()
        self._task_group: TaskGroup | None = None

    def start(self, task_group: TaskGroup) -> None:
        """Write snapshots in ``task_group`` from now on."""
        self._task_group = task_group

    async def aclose(self) -> None:
        """Wait (up to 5 s) for the snapshot writes in flight."""
        with anyio.move_on_after(5.0):
            await self.settled()

    async def settled(self) -> None:
        """Return once no snapshot write is in flight (for tests that count snapshots)."""
        while self._writes:
            await self._idle.wait()

    def rows_of(self, sid: str) -> dict[int, Row]:
        """The rows kept for the next snapshot of the open session ``sid`` (empty if none)."""
        schedule = self._schedules.get(sid)
        return schedule.rows if schedule is not None else {}

    # -- opening -------------------------------------------------------------------------------

    async def restore(self, sid: str, head: int) -> tuple[Restored | None, str | None]:
        """The stored snapshot to open ``sid`` from (its log ending at ``head``), and why the
        stored one is not used (see :func:`usable_snapshot`); ``(None, None)`` without one."""
        if not isinstance(self.backend, Snapshots):
            return None, None
        return await usable_snapshot(self.backend, self.types, sid, head, self.states)

    def rows_cache(self, restored: Restored | None) -> dict[int, Row] | None:
        """The rows cache an open fills as it reads (``None``: snapshots off)."""
        if not self.every:
            return None
        return dict(restored.rows) if restored is not None else {}

    async def states_at(
        self, sid: str, restored: Restored, read: StoredEvents
    ) -> dict[object, CachedState[object]]:
        """The projection states at the snapshot's seq, as cached states: the snapshot's, and
        for each it lacks (absent, another version, undecodable) a fold over the stored events
        up to it, read in chunks with ``read(from_seq, limit)`` (O(log) time, O(state))."""
        states = dict(restored.states)
        missing = [spec for spec in self.states if spec.key not in states]
        if missing:
            logger.info(
                "eventlog: session %r: state(s) %s not in the snapshot: rebuilt from events 0..%d",
                sid,
                ", ".join(spec.key for spec in missing),
                restored.seq,
            )
            folded = {spec.key: spec.initial() for spec in missing}
            async for event in read(0, restored.seq + 1):
                for spec in missing:
                    folded[spec.key] = spec.apply(folded[spec.key], event)
            states.update(folded)
        return {key: CachedState(state, restored.seq + 1) for key, state in states.items()}

    def schedule(
        self, sid: str, head: int, rows: dict[int, Row] | None, *, whole: bool
    ) -> _Schedule | None:
        """The hook of a session opened for writing at ``head`` (``None``: snapshots off);
        ``whole``: it holds its whole log while open (never trimmed)."""
        if not self.every:
            return None
        schedule = _Schedule(self, head, rows if rows is not None else {}, whole)
        self._schedules[sid] = schedule
        return schedule

    def release(self, sid: str) -> None:
        """The session ``sid`` closed: forget its rows."""
        self._schedules.pop(sid, None)

    # -- the rows kept for the next snapshot ---------------------------------------------------

    def keeping_rows(self, write: WriteFunction) -> WriteFunction:
        """``write`` (a backend's), then the surface rows of each session that may snapshot
        (it has compacted) are kept for its next snapshot, which so encodes no payload twice."""
        if not self.every:
            return write

        async def written(batches: Sequence[Batch]) -> Collection[str]:
            conflicts = await write(batches)
            self._keep_rows(batches, conflicts)
            return conflicts

        return written

    def starting_keeping_rows(self, start: StartWrite) -> StartWrite:
        """A backend's pipelined ``start_write``, keeping rows as :meth:`keeping_rows` does."""
        if not self.every:
            return start

        def started(batches: Sequence[Batch], done: WriteDone) -> None:
            def written(conflicts: Collection[str], error: BaseException | None) -> None:
                if error is None:
                    self._keep_rows(batches, conflicts)
                done(conflicts, error)

            start(batches, written)

        return started

    def _keep_rows(self, batches: Sequence[Batch], conflicts: Collection[str]) -> None:
        try:
            for batch in batches:
                session = self._sessions.get(batch.session_id)
                schedule = self._schedules.get(batch.session_id)
                if session is None or schedule is None or not session.surface_index.generation:
                    continue  # not open here (closed meanwhile), or never compacted: no snapshot
                if conflicts and batch.session_id in conflicts:
                    continue  # not written: fenced
                keep_surface_rows(schedule.rows, batch.rows, session.surface_index)
        except Exception:  # only a cache: a round that was written must never look failed
            logger.exception("eventlog: keeping written rows for snapshots failed")

    # -- taking and writing snapshots ----------------------------------------------------------

    def capture(self, session: Session, schedule: _Schedule) -> None:
        """Capture a snapshot of ``session`` now (everything durable) and write it in the
        background; a failed write is logged and ignored (the log is the truth)."""
        if session.id in self._writes or self._task_group is None:
            return  # one in flight already: the next checkpoint writes a newer one
        seq, digest, data = encode_snapshot(session, schedule.rows, self.states)
        if not self._writes:
            self._idle = anyio.Event()
        self._writes.add(session.id)
        self._task_group.start_soon(self._write, session.id, seq, digest, data)

    async def _write(self, sid: str, seq: int, digest: bytes, data: bytes) -> None:
        assert isinstance(self.backend, Snapshots)
        try:
            with anyio.CancelScope(shield=True):
                stored = await self.backend.write_snapshot(sid, seq, digest, data)
            if not stored:
                logger.info("eventlog: session %r: snapshot at seq %d not stored", sid, seq)
        except Exception as exc:
            logger.warning(
                "eventlog: session %r: writing the snapshot at seq %d failed: %s", sid, seq, exc
            )
        finally:
            self._writes.discard(sid)
            if not self._writes:
                self._idle.set()
