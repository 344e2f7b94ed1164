"""The SQLite backend: ``sqlite:///path.db``, the embedded default store.

One file holds many sessions (docs/stores.md). A writer connection in WAL mode, owned by one
thread, writes each group-commit round as one transaction, on the event loop's thread or that
thread (``_rounds`` says which, and why; ``_round_sql`` has the statements); a reader
connection serves ``read``, ``follow``, ``list`` and loads on the event loop's thread (see
:meth:`SQLiteBackend._read` for why), so reads never wait behind a commit on the writer
thread. Driver errors are translated in :func:`~._errors.translated`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable, Collection, Coroutine, Sequence
from functools import partial
from typing import Any, TypeVar

import anyio
import anyio.lowlevel

from ..._codec import Row
from ..._errors import ClosedError, ValidationError
from .._abilities import BackendAbilities, Pipeline
from .._base import Backend, SessionInfo, SessionRecord, rows_in_chunks
from .._batch import Batch, WriteDone
from . import _ops as ops
from ._attachments import insert_attachment, select_attachment
from ._delete import delete_session
from ._errors import translated
from ._liveness import LeaseLocks, writer_alive
from ._round_sql import prepare_round
from ._rounds import Rounds
from ._schema import (
    SYNCHRONOUS,
    check_table_prefix,
    connect_reader,
    connect_writer,
    prepare_schema,
    reserve_wal,
)
from ._snapshots import insert_snapshot, select_hashes, select_snapshot
from ._transaction import waiting_for_lock
from ._worker import Done, SQLiteWorker

__all__ = ("SQLITE_OPTIONS", "SQLiteBackend", "parse_sqlite_url")

T = TypeVar("T")
#: The keyword options of :class:`SQLiteBackend` (``open_store`` refuses any other).
SQLITE_OPTIONS = (
    "durability",
    "busy_timeout",
    "poll_interval",
    "inline_write_bytes",
    "table_prefix",
)

#: Rows per read hop: large enough that a load is a few hops, small enough to stream.
_CHUNK = 1000


def _ignore(_result: object, _error: BaseException | None) -> None:
    """Completion of a best-effort job (``reserve_wal`` swallows its own failures)."""


def parse_sqlite_url(url: str) -> str:
    """The file path of ``sqlite:///relative.db`` or ``sqlite:////absolute/path.db``.

    :raises ValidationError: the URL is not of that form.
    """
    prefix = "sqlite:///"
    path = url[len(prefix) :] if url.startswith(prefix) else ""
    if not path or path.endswith("/") or "\x00" in path or path == ":memory:":
        raise ValidationError(
            f"malformed SQLite URL {url!r}: use 'sqlite:///relative/path.db' or "
            "'sqlite:////absolute/path.db'",
            hint="for a store without a file use 'memory:'",
        )
    return path


def _prepare_writer(connection: sqlite3.Connection, path: str) -> None:
    """The schema (see :func:`prepare_schema`), then the writer connection's round statement."""
    prepare_schema(connection, path)
    prepare_round(connection)


class SQLiteBackend(Backend):
    """Sessions in one SQLite file.

    :param path: the database file (created on first use; its directory must exist).
    :param durability: ``"power-loss"`` (``synchronous=FULL``: each commit is fsynced) or
        ``"process-crash"`` (``synchronous=NORMAL``: survives the process, not the machine).
    :param busy_timeout: seconds a write waits for another process's write lock before failing.
    :param poll_interval: seconds between checks for other processes' writes in ``follow``.
    :param inline_write_bytes: a write round of at most this many payload bytes runs on the
        event loop's thread (no thread hop; the loop waits for that commit); ``0`` sends every
        round to the writer thread.
    :param table_prefix: put before each table name (``meta``, ``sessions``, ``events``), so
        the store can live in a file whose application has tables of those names: a letter
        followed by up to 31 letters, digits or underscores; empty by default. Without it, a
        file holding another application's tables of those names is refused on start
        (``UnsupportedFormatError``), before anything is created.
    :raises ValidationError: an option is out of range.
    """

    def __init__(
        self,
        path: str,
        *,
        durability: str = "power-loss",
        busy_timeout: float = 30.0,
        poll_interval: float = 0.05,
        inline_write_bytes: int = 256 * 1024,
        table_prefix: str = "",
    ) -> None:
        if durability not in SYNCHRONOUS:
            raise ValidationError(
                f"durability must be 'power-loss' or 'process-crash', got {durability!r}"
            )
        for name, value in (("busy_timeout", busy_timeout), ("poll_interval", poll_interval)):
            if not isinstance(value, int | float) or not value > 0:
                raise ValidationError(f"{name} must be a positive number of seconds, got {value!r}")
        if (
            not isinstance(inline_write_bytes, int)
            or isinstance(inline_write_bytes, bool)
            or inline_write_bytes < 0
        ):
            raise ValidationError(
                f"inline_write_bytes must be a whole number of bytes >= 0, got "
                f"{inline_write_bytes!r}"
            )
        self.table_prefix = check_table_prefix(table_prefix)
        self.path = path
        self.durability = durability
        self._busy_timeout_ms = int(busy_timeout * 1000)
        self._poll_interval = float(poll_interval)
        # The writer connection itself waits for no lock: calls on its thread wait through
        # `waiting_for_lock`, the on-loop write never waits (see `start_write`).
        connect = partial(
            connect_writer,
            path,
            synchronous=SYNCHRONOUS[durability],
            busy_timeout=busy_timeout,
            prefix=self.table_prefix,
        )
        self._writer = SQLiteWorker(connect, "eventlog-sqlite-writer")
        self._busy_timeout = busy_timeout
        # The owner token of each lease this store holds: every write checks it is still the
        # session's writer (a stale writer is fenced, never writes into a re-created session).
        self._held: dict[str, str] = {}
        self._rounds = Rounds(
            path,
            self._writer,
            self._held,
            busy_timeout_ms=self._busy_timeout_ms,
            inline_write_bytes=inline_write_bytes,
            written=self._notify,
        )
        # Tells other processes which leases this store holds, without a write (`_liveness`).
        self._locks = LeaseLocks(path)
        # Used on the event loop's thread only (see `_read`).
        self._reader: sqlite3.Connection | None = None
        self._changed: anyio.Event | None = None
        self._closed = False
        # The WAL is reserved once this store is going to write (its first writer lease), so
        # a store only read from (``list``, ``read``, an auditor's copy) never writes 4.5 MiB.
        # Only with power-loss durability does each commit fsync the WAL.
        self._wal_reserved = durability != "power-loss"

    #: Pipelined rounds start on the writer thread (see ``_rounds``).
    abilities = BackendAbilities(pipeline=Pipeline.THREAD)

    def __repr__(self) -> str:
        return f"<SQLiteBackend {self.path!r} durability={self.durability!r}>"

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        self._changed = anyio.Event()
        try:
            with translated(self.path, "opening the database", write=True):
                await self._writer.start()
                await self._call_writer(_prepare_writer, self.path)
                self._reader = connect_reader(
                    self.path, busy_timeout=self._busy_timeout, prefix=self.table_prefix
                )
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.close()
            raise

    async def close(self) -> None:
        self._closed = True
        self._notify()  # wake followers: they find the store closed
        with anyio.CancelScope(shield=True):
            try:
                if self._reader is not None:
                    self._reader.close()
                    self._reader = None
            finally:
                await self._writer.close()
                self._locks.close()

    def _check(self) -> None:
        if self._closed:
            raise ClosedError(f"SQLite store {self.path} is closed")

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = anyio.Event()

    # -- writes (the writer connection) --------------------------------------------------------

    async def _call_writer(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(connection, *args)`` on the writer thread, waiting up to ``busy_timeout`` for
        another process's lock."""
        return await self._writer.call(waiting_for_lock, self._busy_timeout_ms, fn, *args)

    def _submit_writer(self, on_done: Done, fn: Callable[..., Any], *args: Any) -> None:
        """:meth:`_call_writer` without waiting: ``on_done(result, error)`` on the loop."""
        self._writer.submit(on_done, waiting_for_lock, self._busy_timeout_ms, fn, *args)

    def write(self, batches: Sequence[Batch]) -> Coroutine[Any, Any, Collection[str]]:
        """See :meth:`Backend.write`; where it is written is chosen by ``_rounds`` (whose
        coroutine this returns: a round awaits one frame less).

        :raises ClosedError: the store is closed (raised here, before a coroutine is made).
        """
        self._check()
        return self._rounds.write(batches)

    def start_write(self, batches: Sequence[Batch], done: WriteDone) -> None:
        """See :meth:`Backend.start_write`: the writer's pipelined rounds, on the writer
        thread."""
        self._check()
        self._rounds.start(batches, done)

    async def create_session(self, record: SessionRecord, rows: Sequence[Row] = ()) -> None:
        self._check()
        with translated(self.path, "creating a session", write=True, session_id=record.id):
            await self._call_writer(ops.insert_session, record, rows)
        self._notify()

    async def acquire_lease(self, session_id: str, owner: str) -> None:
        self._check()
        with translated(self.path, "taking the writer lease", write=True, session_id=session_id):
            # The lock first: a token that says it is held must be (a refused open leaves it
            # to the release or the close: it is never consulted while another holds the lease).
            token = self._locks.hold(owner, session_id)
            await self._call_writer(ops.acquire_lease, session_id, token)
            self._held[session_id] = token
            if not self._wal_reserved:
                # Queued, not awaited: opening a session must not wait ~10 ms for it. The worker
                # runs jobs in order, so it is in place before this store's first write.
                self._wal_reserved = True
                self._submit_writer(_ignore, reserve_wal, self.path)

    async def writer_alive(self, session_id: str) -> bool:
        """See :meth:`~eventlog.stores.LeaseReader.writer_alive`: the ``host:pid:random``
        token in ``sessions.writer``, whose lease lock or process is checked (`_liveness`)."""
        return writer_alive(self.path, self.table_prefix, session_id)

    async def release_lease(self, session_id: str, owner: str) -> None:
        token = self._locks.stored(owner, session_id)
        if self._held.get(session_id) == token:
            del self._held[session_id]
        try:
            self._check()
            with translated(
                self.path, "releasing the writer lease", write=True, session_id=session_id
            ):
                await self._call_writer(ops.release_lease, session_id, token)
        finally:  # released or not, this store holds the lease no more
            self._locks.let_go(owner, session_id)

    async def delete_session(self, session_id: str, owner: str, *, force: bool = False) -> None:
        self._check()
        with translated(self.path, "deleting a session", write=True, session_id=session_id):
            await self._call_writer(
                delete_session, session_id, self._locks.stored(owner, session_id), force
            )
        self._notify()

    async def put_attachment(self, digest: str, data: bytes) -> None:
        self._check()
        with translated(self.path, f"storing attachment {digest}", write=True):
            await self._call_writer(insert_attachment, digest, data)

    async def write_snapshot(self, session_id: str, seq: int, hash: bytes, data: bytes) -> bool:
        self._check()
        with translated(self.path, "storing a snapshot", write=True, session_id=session_id):
            return await self._call_writer(insert_snapshot, session_id, seq, hash, data)

    # -- reads (the reader connection) ---------------------------------------------------------

    async def read_snapshot(self, session_id: str) -> tuple[int, bytes, bytes] | None:
        self._check()
        with translated(self.path, "reading a snapshot", write=False, session_id=session_id):
            return await self._read(select_snapshot, session_id)

    async def read_hashes(self, session_id: str, seqs: Sequence[int]) -> dict[int, bytes]:
        self._check()
        with translated(self.path, "reading hashes", write=False, session_id=session_id):
            return await self._read(select_hashes, session_id, seqs)

    async def get_attachment(self, digest: str) -> bytes | None:
        self._check()
        with translated(self.path, f"reading attachment {digest}", write=False):
            return await self._read(select_attachment, digest)

    async def _read(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(connection, *args)`` on the reader connection, on the event loop's thread, then
        one checkpoint (so a long load lets other tasks run between its chunks).

        Why not a thread, as for writes: a read has no fsync to wait for and never waits for a
        writer in WAL mode, a hop costs more than most reads (a chunk of 1,000 rows takes about
        1.5 ms), and a reader thread would hold the GIL for most of a read anyway, building the
        rows' Python objects (``benchmarks/SQLITE.md`` has the figures). The one wait a read
        can meet is another connection recovering the WAL after a crash (milliseconds).

        :raises ClosedError: the store is closed.
        """
        reader = self._reader
        if reader is None or self._closed:
            raise ClosedError(f"SQLite store {self.path} is closed")
        result = fn(reader, *args)
        await anyio.lowlevel.checkpoint()
        return result

    async def get_session(self, session_id: str) -> SessionRecord:
        self._check()
        with translated(self.path, "reading a session", write=False, session_id=session_id):
            return await self._read(ops.select_session, session_id)

    async def read_rows(
        self, session_id: str, from_seq: int, limit: int | None
    ) -> AsyncIterator[Sequence[Row]]:
        # Fetching the next chunk while the consumer decodes was measured: no gain (both need
        # the GIL).
        async def fetch(seq: int, count: int) -> Sequence[Row]:
            self._check()
            with translated(self.path, "reading events", write=False, session_id=session_id):
                return await self._read(ops.select_rows, session_id, seq, count)

        try:
            async for rows in rows_in_chunks(fetch, from_seq, limit, _CHUNK):
                yield rows
        except ops.UndecodableRow as bad:
            # The rows before the damaged one are good: a salvage keeps them.
            if bad.rows:
                yield bad.rows
            raise bad.error from None

    async def list_sessions(self, after: str | None, limit: int) -> list[SessionInfo]:
        self._check()
        with translated(self.path, "listing sessions", write=False):
            return await self._read(ops.select_infos, after, limit)

    async def wait_for_change(self, session_id: str, head: int) -> None:
        # Our own writer wakes us at once; other processes' commits show in `data_version`,
        # checked every poll interval (one cheap statement, no busy loop).
        version: int | None = None
        while not self._closed:
            changed = self._changed
            assert changed is not None  # started
            with translated(self.path, "following events", write=False, session_id=session_id):
                version, stored = await self._read(ops.poll_head, session_id, head, version)
            if stored is None or stored > head:
                return
            with anyio.move_on_after(self._poll_interval):
                await changed.wait()
                return
