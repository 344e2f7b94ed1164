"""One stdlib ``sqlite3`` connection owned by one thread, called from async code.

Why not aiosqlite or ``anyio.to_thread``: a turn's write is fsync-bound and short, so every
thread hop shows. A dedicated thread fed by a :class:`queue.SimpleQueue` and answering through
``loop.call_soon_threadsafe`` costs one wake-up each way, cheaper than ``to_thread.run_sync``'s
pool and limiter (figures in ``benchmarks/SQLITE.md``). A whole batch runs as one call, so a write
round is one hop. Calls run strictly one after another, so the connection is never shared.

A call may also run on the event loop's own thread (:meth:`SQLiteWorker.run_here`) when the
worker has nothing queued or running: that costs no hop at all, and the connection is still
used by one thread at a time.

The thread is a daemon: a store that was never closed must not keep the interpreter alive
(``LogStore`` warns about it instead).
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import anyio

from ..._errors import ClosedError

__all__ = ("Connect", "Done", "SQLiteWorker")

T = TypeVar("T")
Connect = Callable[[], sqlite3.Connection]
#: ``on_done(result, error)``, called on the event loop's thread once a call ended.
Done = Callable[[Any, BaseException | None], None]
_Job = tuple[Callable[..., Any], tuple[Any, ...], asyncio.AbstractEventLoop, Done]


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # the awaiting task went away; nobody is listening
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


#: Seconds :meth:`SQLiteWorker.submit` waits at most for the thread to start a handed-off call.
_HAND_OFF_WAIT = 0.005


def _started_first(started: threading.Event, fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(connection: sqlite3.Connection | None, *args: Any) -> Any:
        started.set()
        return fn(connection, *args)

    return run


class SQLiteWorker:
    """A thread that owns one connection and runs ``fn(connection, *args)`` calls in order.

    :param connect: opens the connection (called on the worker thread).
    :param name: the thread's name, shown in debuggers.
    """

    def __init__(self, connect: Connect, name: str) -> None:
        self._connect = connect
        self._name = name
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._connection: sqlite3.Connection | None = None
        self._closed = False
        # Calls queued or running on the thread. Counted up when queued and down when their
        # answer is delivered on the event loop's thread, so both sides of the count live on
        # that thread: zero means the worker will not touch the connection until the next call.
        self._outstanding = 0

    async def start(self) -> None:
        """Start the thread and open the connection on it.

        :raises sqlite3.Error: the connection could not be opened (the thread is stopped).
        """
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()
        try:
            await self._submit(self._open)
        except BaseException:
            await self.close()
            raise

    def _open(self, _: sqlite3.Connection | None) -> None:
        self._connection = self._connect()

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(connection, *args)`` on the worker thread and return its result.

        The call is not abandoned when the caller is cancelled: it finishes first (so a lease or
        a commit is never left half-known), then the cancellation is delivered.

        :raises ClosedError: the worker was closed.
        """
        if self._closed:
            raise ClosedError(f"SQLite connection {self._name!r} is closed")
        return await self._submit(fn, *args)

    @property
    def idle(self) -> bool:
        """Whether no call is queued or running on the thread (see :meth:`run_here`)."""
        return self._outstanding == 0 and self._connection is not None

    def run_here(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(connection, *args)`` now, on the calling (event loop's) thread.

        Only while :attr:`idle`: the worker thread is then waiting for its next call and does
        not use the connection. The call blocks the event loop for as long as it runs.

        :raises ClosedError: the worker was closed.
        :raises RuntimeError: the worker is not idle (a caller's bug).
        """
        if self._closed:
            raise ClosedError(f"SQLite connection {self._name!r} is closed")
        if not self.idle:
            raise RuntimeError(f"SQLite connection {self._name!r} is in use by its thread")
        return fn(self._connection, *args)

    def submit(
        self, on_done: Done, fn: Callable[..., Any], *args: Any, hand_off: bool = False
    ) -> None:
        """Queue ``fn(connection, *args)`` without waiting; ``on_done(result, error)`` is called
        on the calling event loop's thread when it ended (no task needs to wait for it).

        ``hand_off=True``, for a call that soon leaves Python for SQLite (which gives the GIL
        back): when the thread is idle, return only once it has started the call. A busy loop
        otherwise keeps the GIL from the woken thread for up to the interpreter's switch
        interval (5 ms), and the call would start that late; handed off, it runs while the
        loop goes on.

        :raises ClosedError: the worker was closed.
        """
        if self._closed:
            raise ClosedError(f"SQLite connection {self._name!r} is closed")
        if hand_off and self._outstanding == 0:
            started = threading.Event()
            self._put(_started_first(started, fn), args, asyncio.get_running_loop(), on_done)
            # Bounded: the thread takes the GIL from this wait, so it is a few microseconds.
            started.wait(_HAND_OFF_WAIT)
            return
        self._put(fn, args, asyncio.get_running_loop(), on_done)

    def _put(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        loop: asyncio.AbstractEventLoop,
        on_done: Done,
    ) -> None:
        self._outstanding += 1
        self._queue.put((fn, args, loop, partial(self._answered, on_done)))

    def _answered(self, on_done: Done, result: Any, error: BaseException | None) -> None:
        self._outstanding -= 1
        on_done(result, error)

    async def _submit(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._put(fn, args, loop, partial(_settle, future))
        with anyio.CancelScope(shield=True):
            result = await future
        return result

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                break
            fn, args, loop, on_done = job
            result: Any = None
            error: BaseException | None = None
            try:
                result = fn(self._connection, *args)
            except BaseException as exc:  # handed to the caller, never lost
                error = exc
            try:
                loop.call_soon_threadsafe(on_done, result, error)
            except RuntimeError:
                pass  # the caller's event loop is closed; nobody is waiting

    async def close(self) -> None:
        """Close the connection and stop the thread (after queued calls). Idempotent."""
        if self._closed:
            return
        self._closed = True  # from here on new calls are refused; queued ones still run
        thread = self._thread
        if thread is not None and thread.is_alive():
            try:
                await self._submit(self._close_connection)
            finally:
                self._queue.put(None)
                # The thread has answered its last call and is exiting: joining is immediate.
                thread.join()

    def _close_connection(self, connection: sqlite3.Connection | None) -> None:
        self._connection = None
        if connection is not None:
            connection.close()
