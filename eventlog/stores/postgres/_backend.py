"""The PostgreSQL backend: sessions shared by many app hosts through one database.

``open_store("postgresql://user@host:port/db")`` (options below) gives the same guarantees as
the SQLite store, across machines:

- **Group commit.** A write round is one statement on a dedicated connection: one round trip
  and one transaction for every pending event of every session.
  ``synchronous_commit`` is on (``durability="power-loss"``, the default) or off
  (``"process-crash"``: a crash of the app loses nothing, a crash of the server may lose the
  last rounds).
- **One writer per session.** The round moves a session's head (an ``UPDATE`` that locks
  its row) and writes its batch only if the stored head is the one its writer expects *and*
  the lease is still its own; otherwise the batch is a conflict and that session is fenced.
- **Leases across hosts.** Hosts cannot see each other's processes, so a lease has an expiry
  on the server's clock, renewed by a heartbeat every ``lease_ttl / 3`` seconds (and by every
  write). A host that died stops renewing; after ``lease_ttl`` another host may take over.
- **Follow** waits on ``LISTEN/NOTIFY`` (see :mod:`._listen`), never by polling. With
  ``power-loss`` the notification follows the commit (inside it, it would serialise every
  host's commits); with ``process-crash`` it is part of the write transaction.
- **Connection loss** during a round raises :class:`~eventlog.StoreWriteError`; the writer
  keeps the batch and the next round reconnects. A round whose commit landed but whose reply
  was lost is recognised on retry by its hashes and not written twice.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import AbstractContextManager
from typing import Any

import anyio
import asyncpg
import msgspec
from anyio.abc import TaskStatus

from ..._codec import Row
from ..._errors import (
    ClosedError,
    CorruptLogError,
    EventLogError,
    SessionExistsError,
    ValidationError,
)
from .._abilities import BackendAbilities, Pipeline
from .._base import (
    Backend,
    SessionInfo,
    SessionRecord,
    rows_in_chunks,
    session_not_found,
)
from .._batch import Batch
from ._attachments import insert_attachment, select_attachment
from ._delete import delete_session
from ._errors import DRIVER_ERRORS, translate
from ._leases import Leases
from ._listen import Listener, Notifier
from ._rounds import landed_rest, row_columns, write_round
from ._snapshots import SnapshotMethods
from ._sql import Statements, setup_schema
from ._url import malformed, split_url

__all__ = ("PostgresBackend",)

logger = logging.getLogger("eventlog.postgres")

_DURABILITY = {"power-loss": "on", "process-crash": "off"}
_CHUNK = 2000
_metadata_decoder = msgspec.json.Decoder(dict[str, Any])


class PostgresBackend(SnapshotMethods, Backend):
    """Sessions in PostgreSQL tables (docs/stores.md), driven with asyncpg.

    :param url: ``postgresql://user[:password]@host[:port]/database``; a ``schema`` query
        parameter is taken as the ``schema`` option, the rest goes to asyncpg.
    :param durability: ``"power-loss"`` (``synchronous_commit=on``) or ``"process-crash"``
        (``synchronous_commit=off``).
    :param lease_ttl: seconds a writer lease lives without renewal; another host may take a
        session over this long after its writer died.
    :param schema: the schema holding the tables (created on first use); ``public`` default.
    :param create_schema: create the schema and tables when missing (the default); ``False``
        refuses a schema without eventlog's tables with ``StoreNotFoundError`` when the store
        starts, creating nothing (a reader pointed at the wrong place).
    :param pool_size: connections for reads and lease calls (the writer, the listener and the
        notifier each have one more of their own).
    :param connect_timeout: seconds to wait for a connection.
    :param command_timeout: seconds a statement may take before it is cancelled and reported
        (a write round then raises ``StoreWriteError`` and keeps its batch); ``None``: no limit.
    :raises ValidationError: an option is unknown or out of range, or the URL is malformed
        (it does not parse, or a port is not 1..65535).
    """

    #: The server writes a round while the event loop goes on, so the store pipelines many
    #: sessions flushing in step (each pipelined round sent from a task of its own).
    abilities = BackendAbilities(pipeline=Pipeline.TASK)

    def __init__(
        self,
        url: str,
        *,
        durability: str = "power-loss",
        lease_ttl: float = 10.0,
        schema: str | None = None,
        pool_size: int = 4,
        connect_timeout: float = 10.0,
        command_timeout: float | None = 60.0,
        create_schema: bool = True,
        **unknown: Any,
    ) -> None:
        if durability not in _DURABILITY:
            raise ValidationError(
                f"durability must be 'power-loss' or 'process-crash', got {durability!r}"
            )
        if not (isinstance(lease_ttl, int | float) and math.isfinite(lease_ttl) and lease_ttl > 0):
            raise ValidationError(
                f"lease_ttl must be a positive number of seconds, got {lease_ttl!r}"
            )
        if command_timeout is not None and not command_timeout > 0:
            raise ValidationError(
                f"command_timeout must be a positive number of seconds or None, "
                f"got {command_timeout!r}"
            )
        if not isinstance(create_schema, bool):
            raise ValidationError(f"create_schema must be True or False, got {create_schema!r}")
        if pool_size < 1:
            raise ValidationError(f"pool_size must be at least 1, got {pool_size!r}")
        self._dsn, url_schema, self.display_url = split_url(url)
        if unknown:
            raise ValidationError(
                f"unknown option(s) for {self.display_url!r}: {', '.join(sorted(unknown))}"
            )
        self.schema = schema or url_schema or "public"
        self.durability = durability
        self.lease_ttl = float(lease_ttl)
        self._pool_size = pool_size
        self._connect_timeout = connect_timeout
        self._command_timeout = command_timeout
        self._create_schema = create_schema
        self._settings = {
            "application_name": "eventlog",
            "synchronous_commit": _DURABILITY[durability],
        }
        self._sql = Statements.for_schema(self.schema)
        self._pool: Any = None
        self._write_conn: Any = None
        self._listener = Listener(self._connect, self._sql.channel)
        self._notifier = Notifier(self._connect, self._sql.channel, self._sql.notify)
        self._background = False
        # See _sql: notifying inside the write transaction serialises the commits that wait
        # for a WAL flush across the cluster; without that wait it saves a second transaction.
        self._notify_in_transaction = durability == "process-crash"
        self._leases = Leases(self._sql, self.lease_ttl)
        self._closed = False

    def __repr__(self) -> str:
        return f"<PostgresBackend {self.display_url!r} schema={self.schema!r}>"

    def _translate(
        self, action: str, session_id: str | None = None, *, write: bool = True
    ) -> AbstractContextManager[None]:
        return translate(
            self.display_url,
            action,
            session_id=session_id,
            write=write,
            closed=lambda: self._closed,
        )

    def _check_open(self, session_id: str | None = None) -> None:
        if self._closed or self._pool is None:
            raise ClosedError(
                f"store {self.display_url!r} is {'closed' if self._closed else 'not started'}",
                session_id=session_id,
            )

    async def _connect(self) -> Any:
        return await asyncpg.connect(
            self._dsn,
            server_settings=self._settings,
            timeout=self._connect_timeout,
            command_timeout=self._command_timeout,
        )

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        try:
            with self._translate("connecting"):
                self._pool = await asyncpg.create_pool(
                    self._dsn,
                    min_size=1,
                    max_size=self._pool_size,
                    server_settings=self._settings,
                    timeout=self._connect_timeout,
                    command_timeout=self._command_timeout,
                )
        except (ValueError, OverflowError) as exc:  # asyncpg parses the DSN only here
            if isinstance(exc, EventLogError):
                raise
            raise malformed(self.display_url, exc) from exc
        try:
            with self._translate("creating the schema"):
                async with self._pool.acquire() as conn:
                    await setup_schema(
                        conn, self._sql, self.display_url, create=self._create_schema
                    )
                self._write_conn = await self._connect()
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._notifier.aclose()
        await self._listener.aclose()
        self._drop_write_connection()
        pool, self._pool = self._pool, None
        if pool is not None:
            try:
                with anyio.fail_after(10):
                    await pool.close()
            except DRIVER_ERRORS:  # includes TimeoutError
                pool.terminate()

    async def run_background(
        self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """The lease heartbeat and the notifier; the store runs this in its task group."""
        async with anyio.create_task_group() as tg:
            await tg.start(self._notifier.run)
            self._background = True
            task_status.started()
            try:
                while True:
                    await anyio.sleep(self.lease_ttl / 3)
                    await self.renew_leases()
            finally:
                self._background = False

    # -- sessions ------------------------------------------------------------------------------

    async def create_session(self, record: SessionRecord, rows: Sequence[Row] = ()) -> None:
        self._check_open(record.id)
        metadata = msgspec.json.encode(record.metadata).decode()
        head = rows[-1].seq if rows else -1
        with self._translate("creating the session", record.id):
            async with self._pool.acquire() as conn, conn.transaction():
                created = await conn.fetchval(
                    self._sql.insert_session,
                    record.id,
                    record.created_at,
                    record.parent_id,
                    record.fork_seq,
                    metadata,
                    head,
                )
                if created is None:
                    raise SessionExistsError(
                        f"session {record.id!r} already exists", session_id=record.id
                    )
                if rows:
                    await conn.execute(self._sql.insert_rows, record.id, *row_columns(rows))

    async def get_session(self, session_id: str) -> SessionRecord:
        self._check_open(session_id)
        with self._translate("reading the session", session_id, write=False):
            found = await self._pool.fetchrow(self._sql.get_session, session_id)
        if found is None:
            raise session_not_found(session_id)
        try:
            metadata = _metadata_decoder.decode(found[4])
        except msgspec.DecodeError as exc:
            raise CorruptLogError(
                f"session {session_id!r}: stored metadata does not decode: {exc}",
                session_id=session_id,
                hint="the sessions row was altered outside eventlog",
            ) from exc
        return SessionRecord(
            id=found[0],
            created_at=found[1],
            parent_id=found[2],
            fork_seq=found[3],
            metadata=metadata,
            head=found[5],
        )

    async def read_rows(
        self, session_id: str, from_seq: int, limit: int | None
    ) -> AsyncIterator[Sequence[Row]]:
        self._check_open(session_id)
        fetched = False

        async def fetch(seq: int, size: int) -> Sequence[Row]:
            nonlocal fetched
            with self._translate("reading events", session_id, write=False):
                records = await self._pool.fetch(self._sql.read_rows, session_id, seq, size)
            if not records and not fetched:
                await self.get_session(session_id)  # an empty log, or no such session
            fetched = True
            return [Row(r[0], r[1], r[2], r[3], r[4], r[5], r[6].encode(), r[7]) for r in records]

        async for rows in rows_in_chunks(fetch, from_seq, limit, _CHUNK):
            yield rows
        if not fetched:  # limit 0: still an error for a missing session
            await self.get_session(session_id)

    async def list_sessions(self, after: str | None, limit: int) -> list[SessionInfo]:
        self._check_open()
        with self._translate("listing sessions", write=False):
            if after is None:
                found = await self._pool.fetch(self._sql.list_sessions, limit)
            else:
                found = await self._pool.fetch(self._sql.list_sessions_after, limit, after)
        return [_info(r) for r in found]

    async def delete_session(self, session_id: str, owner: str, *, force: bool = False) -> None:
        self._check_open(session_id)
        with self._translate("deleting the session", session_id):
            async with self._pool.acquire() as conn, conn.transaction():
                await delete_session(conn, self._sql, self.schema, session_id, owner, force)
        self._leases.held.pop(session_id, None)

    async def put_attachment(self, digest: str, data: bytes) -> None:
        self._check_open()
        with self._translate(f"storing attachment {digest}"):
            async with self._pool.acquire() as conn:
                await insert_attachment(conn, self.schema, digest, data)

    async def get_attachment(self, digest: str) -> bytes | None:
        self._check_open()
        with self._translate(f"reading attachment {digest}", write=False):
            async with self._pool.acquire() as conn:
                return await select_attachment(conn, self.schema, digest)

    # -- writing -------------------------------------------------------------------------------

    async def write(self, batches: Sequence[Batch]) -> Collection[str]:
        self._check_open()
        batches = sorted(batches, key=lambda b: b.session_id)  # one lock order for every host
        count = sum(len(b.rows) for b in batches)
        with self._translate(f"writing {count} events of {len(batches)} sessions"):
            conn = await self._write_connection()
            try:
                conflicts = await self._write_round(conn, batches)
                if conflicts:
                    conflicts = await self._resume_landed(conn, batches, conflicts)
            except BaseException:
                # The connection is in doubt (lost, or mid-statement): use a fresh one next
                # round. The retry is safe: a round that did commit is recognised by its hashes.
                self._drop_write_connection()
                raise
        written = {b.session_id for b in batches}.difference(conflicts)
        self._listener.wake(written)  # followers in this process need no round trip
        if not self._notify_in_transaction:
            self._notifier.changed(written)
            if not self._background:
                await self._notifier.send()
        return conflicts

    async def _write_round(self, conn: Any, batches: Sequence[Batch]) -> set[str]:
        """Write ``batches`` in one statement; return the sessions in conflict."""
        channel = self._sql.channel if self._notify_in_transaction else None
        return await write_round(
            conn, self._sql.write, batches, self._leases.owner, self.lease_ttl, channel
        )

    async def _resume_landed(
        self, conn: Any, batches: Sequence[Batch], conflicts: set[str]
    ) -> set[str]:
        """See :func:`~._rounds.landed_rest`: the conflicts left once the rounds whose reply
        was lost are recognised (and the rest of their batches written)."""
        landed, rest = await landed_rest(
            conn, self._sql.stored_heads, batches, conflicts, self._leases.owner
        )
        if rest:
            landed -= await self._write_round(conn, rest)
        return conflicts - landed

    async def _write_connection(self) -> Any:
        conn = self._write_conn
        if conn is None or conn.is_closed():
            conn = await self._connect()
            if self._closed:  # closed while connecting
                conn.terminate()
                self._check_open()
            self._write_conn = conn
        return conn

    def _drop_write_connection(self) -> None:
        conn, self._write_conn = self._write_conn, None
        if conn is not None:
            conn.terminate()

    # -- leases --------------------------------------------------------------------------------

    async def acquire_lease(self, session_id: str, owner: str) -> None:
        self._check_open(session_id)
        with self._translate("taking the writer lease", session_id):
            await self._leases.acquire(self._pool, session_id, owner)

    async def writer_alive(self, session_id: str) -> bool:
        """See :meth:`~eventlog.stores.LeaseReader.writer_alive`: ``writer`` and
        ``lease_until``, on the server's clock."""
        try:
            found = await self._pool.fetchrow(self._sql.lease_holder, session_id)
        except Exception:  # a lease we cannot read says nothing about the run
            return False
        if found is None:
            return False
        writer, remaining = found
        return writer is not None and remaining is not None and remaining > 0

    async def release_lease(self, session_id: str, owner: str) -> None:
        if self._closed or self._pool is None:
            self._leases.held.pop(session_id, None)
            return
        with self._translate("releasing the writer lease", session_id):
            await self._leases.release(self._pool, session_id, owner)

    async def renew_leases(self) -> None:
        """Extend every lease this store holds; a failure is logged (the next beat retries,
        and a lease lost meanwhile fences its session at its next write)."""
        if self._closed:
            return
        try:
            with self._translate("renewing leases"):
                lost = await self._leases.renew(self._pool)
        except Exception as exc:  # the heartbeat must outlive any failure: it is retried
            logger.warning("eventlog: lease heartbeat failed: %s", exc)
            return
        for sid in sorted(lost):
            logger.warning("eventlog: session %r: another host took the writer lease over", sid)

    # -- following -----------------------------------------------------------------------------

    async def wait_for_change(self, session_id: str, head: int) -> None:
        if self._closed:
            return
        with self._translate("waiting for new events", session_id, write=False):
            # Listen first, then look: a commit after the look is notified to us.
            changed = await self._listener.watch(session_id)
            stored = await self._pool.fetchval(self._sql.get_head, session_id)
        if stored is None or stored > head:
            return
        await changed.wait()


def _info(record: Any) -> SessionInfo:
    sid = record[0]
    try:
        metadata = _metadata_decoder.decode(record[5])
    except msgspec.DecodeError as exc:
        return SessionInfo(id=sid, head=record[2], error=f"metadata does not decode: {exc}")
    return SessionInfo(
        id=sid,
        created_at=record[1],
        head=record[2],
        parent_id=record[3],
        fork_seq=record[4],
        metadata=metadata,
        last_time=record[6],
    )
