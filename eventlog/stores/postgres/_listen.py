"""Change notification across hosts: ``LISTEN`` on one connection, ``NOTIFY`` after commits.

A write round commits first; then the :class:`Notifier` (a background task of the store)
sends ``pg_notify(channel, session_id)`` for the sessions it advanced, on a connection of its
own. It is not sent inside the write transaction because PostgreSQL serialises the commits of
notifying transactions cluster-wide until after their WAL flush, which would serialise every
host's writer. Changes of the next few milliseconds after a send are gathered into one
notification transaction (a follower elsewhere learns of a commit at most that much later).
With ``durability="process-crash"`` commits do not wait for a flush and the write round
notifies inside its own transaction instead.

A follower first makes sure its store is listening, then checks the stored head, then waits:
a commit after the check is followed by a notification to a connection that was already
listening, so no change falls between the two. Follow reads rows by seq, so it stays gap-free
whatever the notifications do. A writer that dies between its commit and its notification
leaves followers waiting until the session's next change (the next writer, after taking the
session over, notifies).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import anyio
from anyio.abc import TaskStatus

__all__ = ("Listener", "Notifier", "close_connection")

logger = logging.getLogger("eventlog.postgres")


class Listener:
    """Wakes waiters per session when a notification for it arrives.

    :param connect: opens a new connection (the listener owns and closes it).
    :param channel: the store's notification channel.
    """

    def __init__(self, connect: Callable[[], Awaitable[Any]], channel: str) -> None:
        self._connect = connect
        self._channel = channel
        self._conn: Any = None
        self._lock = anyio.Lock()
        self._waiters: dict[str, anyio.Event] = {}
        self._closed = False

    async def watch(self, session_id: str) -> anyio.Event:
        """Make sure this store is listening; return the event set by the next notification
        about ``session_id`` (or when the listening connection is lost or closed).

        Driver errors propagate (the caller translates them).
        """
        async with self._lock:
            if self._closed:
                closed = anyio.Event()
                closed.set()
                return closed
            if self._conn is None or self._conn.is_closed():
                await self._listen()
        event = self._waiters.get(session_id)
        if event is None:
            event = self._waiters[session_id] = anyio.Event()
        return event

    async def _listen(self) -> None:
        # Held in self._conn at once, so that a close() during the setup closes it too.
        conn = self._conn = await self._connect()
        if self._closed:
            conn.terminate()
            return
        try:
            await conn.add_listener(self._channel, self._notified)
        except BaseException:
            conn.terminate()
            self._conn = None
            raise
        conn.add_termination_listener(self._lost)

    def _notified(self, conn: Any, pid: int, channel: str, payload: str) -> None:
        self.wake((payload,))

    def _lost(self, conn: Any) -> None:
        # Notifications sent while nobody listened are gone: wake everyone to re-check.
        if conn is self._conn:
            self._conn = None
        if not self._closed:
            logger.warning("eventlog: the LISTEN connection was lost; followers re-check")
        self.wake_all()

    def wake(self, session_ids: Iterable[str]) -> None:
        """Wake the waiters of ``session_ids`` (their sessions changed)."""
        for sid in session_ids:
            event = self._waiters.pop(sid, None)
            if event is not None:
                event.set()

    def wake_all(self) -> None:
        """Wake every waiter (they re-check the stored head)."""
        waiters, self._waiters = self._waiters, {}
        for event in waiters.values():
            event.set()

    async def aclose(self) -> None:
        """Stop listening and wake every waiter. Idempotent."""
        self._closed = True
        conn, self._conn = self._conn, None
        self.wake_all()
        await close_connection(conn)


class Notifier:
    """Sends the notifications of committed rounds, off the write path.

    :param connect: opens a new connection (the notifier owns and closes it).
    :param channel: the store's notification channel.
    :param statement: ``$1`` channel, ``$2`` session ids: one notification per id.
    :param gather: seconds after a send during which further changes are gathered into the
        next one; each send is a transaction of its own, which costs the server (and a 2-core
        host) a quarter of its writing throughput when sent after every round.
    """

    def __init__(
        self,
        connect: Callable[[], Awaitable[Any]],
        channel: str,
        statement: str,
        *,
        gather: float = 0.005,
    ) -> None:
        self._connect = connect
        self._gather = gather
        self._channel = channel
        self._statement = statement
        self._conn: Any = None
        self._pending: set[str] = set()
        self._wake = anyio.Event()
        self._lock = anyio.Lock()
        self._closed = False

    def changed(self, session_ids: Iterable[str]) -> None:
        """Note sessions whose stored head moved; the running task notifies them soon."""
        self._pending.update(session_ids)
        self._wake.set()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Send notifications as rounds commit, until cancelled."""
        task_status.started()
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            if not await self.send():
                await anyio.sleep(0.5)  # the server is unreachable: pace the retries
            else:
                await anyio.sleep(self._gather)

    async def send(self) -> bool:
        """Notify every noted session now; on failure keep them for the next try.

        :returns: whether the notifications went out.
        """
        async with self._lock:
            return await self._send()

    async def _send(self) -> bool:
        if not self._pending or self._closed:
            return True
        ids, self._pending = self._pending, set()
        sent = False
        try:
            if self._conn is None or self._conn.is_closed():
                conn = await self._connect()
                if self._closed:  # closed while connecting (close() gave up waiting)
                    conn.terminate()
                    return False
                self._conn = conn
            await self._conn.fetchval(self._statement, self._channel, sorted(ids))
            sent = True
        except Exception as exc:
            logger.warning("eventlog: notifying followers failed, will retry: %s", exc)
        finally:
            if not sent:  # failed or cancelled: keep them for the next try, on a new connection
                self._pending |= ids
                self._drop()
                self._wake.set()
        return sent

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.terminate()

    async def aclose(self) -> None:
        """Send what is noted (best effort; after a send in flight) and close the connection."""
        with anyio.move_on_after(2):
            await self.send()
        self._closed = True
        conn, self._conn = self._conn, None
        await close_connection(conn)


async def close_connection(conn: Any) -> None:
    """Close an asyncpg connection politely, or abort it when that fails or hangs."""
    if conn is None or conn.is_closed():
        return
    try:
        with anyio.fail_after(5):
            await conn.close()
    except Exception:
        conn.terminate()
