"""Change notification across hosts: ``LISTEN`` on one dedicated connection per store.

Every write round ends with ``pg_notify(channel, session_id)`` inside its transaction, so a
notification is sent exactly when the rows became visible. A follower first makes sure this
store is listening, then checks the stored head, then waits: a commit after the check is
notified to a connection that was already listening, so no change falls between the two.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

__all__ = ("Listener",)

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
            if self._conn is None or self._conn.is_closed():
                await self._listen()
        event = self._waiters.get(session_id)
        if event is None:
            event = self._waiters[session_id] = anyio.Event()
        return event

    async def _listen(self) -> None:
        conn = await self._connect()
        try:
            await conn.add_listener(self._channel, self._notified)
        except BaseException:
            conn.terminate()
            raise
        conn.add_termination_listener(self._lost)
        self._conn = conn

    def _notified(self, conn: Any, pid: int, channel: str, payload: str) -> None:
        event = self._waiters.pop(payload, None)
        if event is not None:
            event.set()

    def _lost(self, conn: Any) -> None:
        # Notifications sent while nobody listened are gone: wake everyone to re-check.
        if conn is self._conn:
            self._conn = None
        if not self._closed:
            logger.warning("eventlog: the LISTEN connection was lost; followers re-check")
        self.wake_all()

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
        if conn is not None and not conn.is_closed():
            try:
                with anyio.fail_after(5):
                    await conn.close()
            except Exception:
                conn.terminate()
