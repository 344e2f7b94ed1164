"""``FaultyStore``: a store whose Nth write fails, or whose process "crashes" at the Nth write.

The fault sits on the write rounds every store shares (:meth:`Backend.write`, and
:meth:`~eventlog.stores.Backend.start_write` where the backend pipelines rounds on a thread of
its own), so it wraps any backend: memory, SQLite, PostgreSQL. Rounds are counted
from 0 in the order the store's writer issues them, whichever of the two routes carries them.

- ``fail_at=N`` (with ``failures=k``): writes ``N .. N+k-1`` raise
  :class:`~eventlog.StoreWriteError` and write nothing, like a full disk; later writes succeed.
  The writer keeps the batch, ``flush()`` raises, the next flush retries: nothing is lost.
- ``crash_at=N``: write ``N`` and every later one raise :class:`SimulatedCrash` and write
  nothing, as if the process died just before write ``N`` reached the disk. With
  ``crash_after_write=True`` write ``N`` lands first and only its acknowledgement is lost (the
  process died just after the commit). Act out the restart by opening a new store on the same
  data (``MemoryData.restarted()``, or the same SQLite file) and repairing.

Every other route that changes stored data (creating, forking or importing a session, deleting
one, taking a lease, storing an attachment or a snapshot, a backend's background lease renewal)
is not counted, but refused with :class:`SimulatedCrash` once the store crashed: a dead
process stores nothing more. Only releasing a lease still passes, so the crashed store's close
lets the same test process take the session over again. Each route of every backend is named
in :data:`ROUTES`; the wrapper defines each one itself, and refuses to forward any other
method of its backend, so no write can reach the backend around the fault.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from typing import Any, ClassVar

import anyio
from anyio.abc import TaskStatus

from eventlog import SessionInfo, StoreWriteError
from eventlog.stores import (
    Backend,
    BackendAbilities,
    BackgroundTask,
    Batch,
    LeaseReader,
    LogStore,
    MaskedUrl,
    Row,
    SessionRecord,
    Snapshots,
)

__all__ = ("ROUTES", "FaultyBackend", "FaultyStore", "SimulatedCrash")

#: How the wrapper treats each method of a backend: ``"counted"`` (a write round: the fault
#: plan applies), ``"guarded"`` (changes stored data: refused once crashed), ``"background"``
#: (a backend's own write, run only by its :meth:`run_background`, which is stopped at the
#: crash), ``"passed"`` (reads, lifecycle, and releasing a lease: forwarded as they are).
ROUTES: dict[str, str] = {
    "write": "counted",
    "start_write": "counted",
    "create_session": "guarded",
    "delete_session": "guarded",
    "acquire_lease": "guarded",
    "put_attachment": "guarded",
    "write_snapshot": "guarded",
    "run_background": "guarded",
    "renew_leases": "background",
    "release_lease": "passed",
    "start": "passed",
    "close": "passed",
    "get_session": "passed",
    "read_rows": "passed",
    "list_sessions": "passed",
    "wait_for_change": "passed",
    "get_attachment": "passed",
    "read_snapshot": "passed",
    "read_hashes": "passed",
    "writer_alive": "passed",
}


class SimulatedCrash(StoreWriteError):
    """The faulty store "crashed": this write and every later one never reach the store."""


class FaultyBackend(Backend):
    """A :class:`~eventlog.stores.Backend` that injects faults into its write rounds.

    It has exactly the optional abilities of the backend it wraps (``FaultyBackend(b)`` is an
    instance of a subclass adding them, and declaring the same
    :class:`~eventlog.stores.BackendAbilities`), each defined here, so each goes through the
    fault.

    :ivar writes: how many write rounds were attempted so far (the next round's index).
    :ivar crashed: True once the simulated crash happened.
    :ivar failed: how many write rounds ended in an injected failure (``fail_at``): proof that
        the fault fired (a run that writes less than ``fail_at`` times sees none).
    :ivar routes: how many calls each counted or guarded route got (proof that a fault path
        was exercised: e.g. ``routes["start_write"]`` for SQLite's pipelined rounds).
    """

    _classes: ClassVar[dict[tuple[frozenset[type], BackendAbilities], type[FaultyBackend]]] = {}

    def __new__(cls, backend: Backend, **_faults: Any) -> FaultyBackend:
        if cls is FaultyBackend:
            cls = _with_abilities_of(backend)
        return super().__new__(cls)

    def __init__(
        self,
        backend: Backend,
        *,
        fail_at: int | None = None,
        failures: int = 1,
        crash_at: int | None = None,
        crash_after_write: bool = False,
    ) -> None:
        self.inner = backend
        self.fail_at = fail_at
        self.failures = failures
        self.crash_at = crash_at
        self.crash_after_write = crash_after_write
        self.writes = 0
        self.crashed = False
        self.failed = 0
        self.routes: Counter[str] = Counter()
        # Set at the crash: stops the backend's background task (see `_Background`).
        self._crash_event: anyio.Event | None = None

    def _next_round(self, route: str) -> tuple[StoreWriteError | None, bool]:
        """Count a write round; return the error it ends with (``None``: none) and whether its
        rows still land."""
        index = self.writes
        self.writes += 1
        self.routes[route] += 1
        if self.crashed:
            return SimulatedCrash(
                f"write {index}: the store crashed at write {self.crash_at}"
            ), False
        if self.crash_at is not None and index >= self.crash_at:
            self._crash()
            landed = "after" if self.crash_after_write else "before"
            return SimulatedCrash(f"write {index}: simulated crash {landed} the write"), (
                self.crash_after_write
            )
        if self.fail_at is not None and self.fail_at <= index < self.fail_at + self.failures:
            self.failed += 1
            return StoreWriteError(f"write {index}: injected write failure"), False
        return None, True

    def _crash(self) -> None:
        self.crashed = True
        if self._crash_event is not None:
            self._crash_event.set()

    def _guard(self, route: str, what: str) -> None:
        """Refuse a write outside the rounds once crashed."""
        self.routes[route] += 1
        if self.crashed:
            raise SimulatedCrash(f"{what}: the store crashed at write {self.crash_at}")

    # -- counted ---------------------------------------------------------------------------------

    async def write(self, batches: Sequence[Batch]) -> Collection[str]:
        error, lands = self._next_round("write")
        if error is None:
            return await self.inner.write(batches)
        if lands:
            await self.inner.write(batches)
        raise error

    # -- guarded ---------------------------------------------------------------------------------

    async def create_session(self, record: SessionRecord, rows: Sequence[Row] = ()) -> None:
        self._guard("create_session", f"creating session {record.id!r}")
        await self.inner.create_session(record, rows)

    async def delete_session(self, session_id: str, owner: str, *, force: bool = False) -> None:
        self._guard("delete_session", f"deleting session {session_id!r}")
        await self.inner.delete_session(session_id, owner, force=force)

    async def acquire_lease(self, session_id: str, owner: str) -> None:
        self._guard("acquire_lease", f"taking the lease of session {session_id!r}")
        await self.inner.acquire_lease(session_id, owner)

    async def put_attachment(self, digest: str, data: bytes) -> None:
        self._guard("put_attachment", f"attachment {digest}")
        await self.inner.put_attachment(digest, data)

    # -- passed ----------------------------------------------------------------------------------

    async def release_lease(self, session_id: str, owner: str) -> None:
        # Deliberately passed: the crashed store's close frees the session for the next store.
        await self.inner.release_lease(session_id, owner)

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()

    async def get_session(self, session_id: str) -> SessionRecord:
        return await self.inner.get_session(session_id)

    def read_rows(
        self, session_id: str, from_seq: int, limit: int | None
    ) -> AsyncIterator[Sequence[Row]]:
        return self.inner.read_rows(session_id, from_seq, limit)

    async def list_sessions(self, after: str | None, limit: int) -> list[SessionInfo]:
        return await self.inner.list_sessions(after, limit)

    async def wait_for_change(self, session_id: str, head: int) -> None:
        await self.inner.wait_for_change(session_id, head)

    async def get_attachment(self, digest: str) -> bytes | None:
        return await self.inner.get_attachment(digest)

    def start_write(
        self,
        batches: Sequence[Batch],
        done: Callable[[Collection[str], BaseException | None], None],
    ) -> None:
        inner = self.inner
        error, lands = self._next_round("start_write")
        if error is None:
            inner.start_write(batches, done)
            return
        if not lands:
            raise error  # nothing started: the writer ends the round with the error

        def landed(_conflicts: Collection[str], failed: BaseException | None) -> None:
            done((), failed if failed is not None else error)

        inner.start_write(batches, landed)

    def __getattr__(self, name: str) -> Any:
        # Plain attributes of the backend (a path, a schema) pass through; a method must be one
        # of the routes defined here, so a new write route cannot bypass the fault unnoticed.
        if name == "inner":  # not set yet (still in __init__)
            raise AttributeError(name)
        value = getattr(self.inner, name)
        if callable(value):
            raise AttributeError(
                f"FaultyBackend does not forward {name!r}: add it to ROUTES and define it"
            )
        return value


# -- the optional abilities, each defined so it goes through the fault --------------------------


class _Snapshots(FaultyBackend):
    async def write_snapshot(self, session_id: str, seq: int, hash: bytes, data: bytes) -> bool:
        inner = self.inner
        assert isinstance(inner, Snapshots)
        self._guard("write_snapshot", f"snapshot of session {session_id!r} at seq {seq}")
        return await inner.write_snapshot(session_id, seq, hash, data)

    async def read_snapshot(self, session_id: str) -> tuple[int, bytes, bytes] | None:
        inner = self.inner
        assert isinstance(inner, Snapshots)
        return await inner.read_snapshot(session_id)

    async def read_hashes(self, session_id: str, seqs: Sequence[int]) -> dict[int, bytes]:
        inner = self.inner
        assert isinstance(inner, Snapshots)
        return await inner.read_hashes(session_id, seqs)


class _LeaseReader(FaultyBackend):
    async def writer_alive(self, session_id: str) -> bool:
        inner = self.inner
        assert isinstance(inner, LeaseReader)
        return await inner.writer_alive(session_id)


class _Background(FaultyBackend):
    async def run_background(
        self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        # The backend's background task writes too (PostgreSQL renews its leases): a dead
        # process's stops, so its leases expire as they would.
        inner = self.inner
        assert isinstance(inner, BackgroundTask)
        self.routes["run_background"] += 1
        self._crash_event = crashed = anyio.Event()
        if self.crashed:
            task_status.started()
            return
        async with anyio.create_task_group() as tg:
            await tg.start(inner.run_background)
            task_status.started()
            await crashed.wait()
            tg.cancel_scope.cancel()


class _MaskedUrl(FaultyBackend):
    @property
    def display_url(self) -> str:
        inner = self.inner
        assert isinstance(inner, MaskedUrl)
        return inner.display_url


_ABILITIES: tuple[tuple[type, type[FaultyBackend]], ...] = (
    (Snapshots, _Snapshots),
    (LeaseReader, _LeaseReader),
    (BackgroundTask, _Background),
    (MaskedUrl, _MaskedUrl),
)


def _with_abilities_of(backend: Backend) -> type[FaultyBackend]:
    """The subclass of :class:`FaultyBackend` with exactly ``backend``'s optional abilities."""
    has = frozenset(ability for ability, _ in _ABILITIES if isinstance(backend, ability))
    key = (has, backend.abilities)
    found = FaultyBackend._classes.get(key)
    if found is None:
        bases = tuple(mixin for ability, mixin in _ABILITIES if ability in has)
        namespace = {"__module__": __name__, "abilities": backend.abilities}
        found = type("FaultyBackend", (*bases, FaultyBackend), namespace)
        FaultyBackend._classes[key] = found
    return found


class FaultyStore(LogStore):
    """A store over a :class:`FaultyBackend`; use exactly like the store it wraps.

    :param store: a store from :func:`eventlog.open_store` (not yet entered), or a backend.
    :param fail_at: index of the first write to fail (``failures`` writes fail in a row).
    :param crash_at: index of the write at which the simulated process dies.
    :param crash_after_write: the crashing write lands before the crash.
    :param write_delay: seconds the background writer gathers events; the default (an hour)
        writes only on ``flush()``, so write indexes are deterministic.
    """

    def __init__(
        self,
        store: LogStore | Backend,
        *,
        fail_at: int | None = None,
        failures: int = 1,
        crash_at: int | None = None,
        crash_after_write: bool = False,
        write_delay: float = 3600.0,
    ) -> None:
        def faulty(backend: Backend) -> FaultyBackend:
            return FaultyBackend(
                backend,
                fail_at=fail_at,
                failures=failures,
                crash_at=crash_at,
                crash_after_write=crash_after_write,
            )

        if isinstance(store, LogStore):
            options = store.options_over(faulty)
        else:
            options = {"backend": faulty(store), "url": ""}
        self.faults: FaultyBackend = options["backend"]
        url = options["url"]
        options["url"] = f"faulty+{url}" if url else "faulty"
        super().__init__(**options, write_delay=write_delay)

    async def __aenter__(self) -> FaultyStore:
        await super().__aenter__()
        return self

    @property
    def writes(self) -> int:
        """How many writes were attempted so far."""
        return self.faults.writes

    @property
    def crashed(self) -> bool:
        """True once the simulated crash happened."""
        return self.faults.crashed

    @property
    def failed(self) -> int:
        """How many writes ended in an injected failure so far."""
        return self.faults.failed
