"""``FaultyStore``: a store whose Nth write fails, or whose process "crashes" at the Nth write.

The fault sits on the write path every store shares (:meth:`Backend.write`, called once per
group-commit round), so it wraps any backend: memory, SQLite, PostgreSQL. Writes are counted
from 0 in the order the store's writer issues them.

- ``fail_at=N`` (with ``failures=k``): writes ``N .. N+k-1`` raise
  :class:`~eventlog.StoreWriteError` and write nothing, like a full disk; later writes succeed.
  The writer keeps the batch, ``flush()`` raises, the next flush retries: nothing is lost.
- ``crash_at=N``: write ``N`` and every later one raise :class:`SimulatedCrash` and write
  nothing, as if the process died just before write ``N`` reached the disk. With
  ``crash_after_write=True`` write ``N`` lands first and only its acknowledgement is lost (the
  process died just after the commit). Act out the restart by opening a new store on the same
  data (``MemoryData.restarted()``, or the same SQLite file) and repairing.

Only writes are faulted: leases are still released when the crashed store is closed, so the
same test process can take the session over again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Sequence
from typing import Any

from eventlog import SessionInfo, StoreWriteError
from eventlog.stores import Backend, Batch, LogStore, Row, SessionRecord

__all__ = ("FaultyBackend", "FaultyStore", "SimulatedCrash")


class SimulatedCrash(StoreWriteError):
    """The faulty store "crashed": this write and every later one never reach the store."""


class FaultyBackend(Backend):
    """A :class:`~eventlog.stores.base.Backend` that injects faults into ``write``.

    :ivar writes: how many writes were attempted so far (the next write's index).
    :ivar crashed: True once the simulated crash happened.
    """

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

    async def write(self, batches: Sequence[Batch]) -> Collection[str]:
        index = self.writes
        self.writes += 1
        if self.crashed:
            raise SimulatedCrash(f"write {index}: the store crashed at write {self.crash_at}")
        if self.crash_at is not None and index >= self.crash_at:
            if self.crash_after_write:
                await self.inner.write(batches)
            self.crashed = True
            landed = "after" if self.crash_after_write else "before"
            raise SimulatedCrash(f"write {index}: simulated crash {landed} the write")
        if self.fail_at is not None and self.fail_at <= index < self.fail_at + self.failures:
            raise StoreWriteError(f"write {index}: injected write failure")
        return await self.inner.write(batches)

    # -- everything else passes through --------------------------------------------------------

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()

    async def create_session(self, record: SessionRecord, rows: Sequence[Row] = ()) -> None:
        await self.inner.create_session(record, rows)

    async def get_session(self, session_id: str) -> SessionRecord:
        return await self.inner.get_session(session_id)

    def read_rows(
        self, session_id: str, from_seq: int, limit: int | None
    ) -> AsyncIterator[Sequence[Row]]:
        return self.inner.read_rows(session_id, from_seq, limit)

    async def acquire_lease(self, session_id: str, owner: str) -> None:
        await self.inner.acquire_lease(session_id, owner)

    async def release_lease(self, session_id: str, owner: str) -> None:
        await self.inner.release_lease(session_id, owner)

    async def list_sessions(self, after: str | None, limit: int) -> list[SessionInfo]:
        return await self.inner.list_sessions(after, limit)

    async def delete_session(self, session_id: str, owner: str, *, force: bool = False) -> None:
        await self.inner.delete_session(session_id, owner, force=force)

    async def wait_for_change(self, session_id: str, head: int) -> None:
        await self.inner.wait_for_change(session_id, head)

    async def put_attachment(self, digest: str, data: bytes) -> None:
        # Not a counted write (it is not a group-commit round), but a crashed process stores
        # nothing more.
        if self.crashed:
            raise SimulatedCrash(f"attachment {digest}: the store crashed at write {self.crash_at}")
        await self.inner.put_attachment(digest, data)

    async def get_attachment(self, digest: str) -> bytes | None:
        return await self.inner.get_attachment(digest)

    def __getattr__(self, name: str) -> Any:
        # Optional backend extras (e.g. ``run_background``) pass through too.
        return getattr(self.inner, name)


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
