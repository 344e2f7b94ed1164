"""How the SQLite backend writes: a ``BEGIN IMMEDIATE`` transaction, or one statement that is
its own transaction, and how each waits for the write lock.

Every write path (session creation, leases, deletes, attachments, the schema, the WAL reserve,
a write round that needs more than one statement) opens its transaction with
:func:`transaction`. ``BEGIN IMMEDIATE`` takes the write lock up front, so a transaction never
fails half-way on a lock upgrade. A packed write round is one statement (its trigger moves the
heads and inserts the rows), run by :func:`one_statement` in autocommit: SQLite takes the write
lock at the start of a writing statement too (the lock and the commit are in the same
``sqlite3_step``), so it never fails half-way either, and a round on the writer thread gives
the GIL back once, for all of its work and its fsync.

The writer connection's own busy timeout is zero, so nothing on it waits for another
process's write lock unless told to: a write on the event loop's thread must never block the
loop for ``busy_timeout``. The writer thread's jobs are told to, two ways: a whole job runs
under :func:`waiting_for_lock` (session creation, leases, deletes...), or a write round waits
only when the lock is taken (``wait_ms``: a round costs the thread a GIL round trip per
statement, so the two extra statements are paid only then).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = ("WriteLockBusy", "one_statement", "rollback", "transaction", "waiting_for_lock")

T = TypeVar("T")


class WriteLockBusy(Exception):
    """Another connection holds the database's write lock and the transaction was told not to
    wait for it (``wait_ms=0``); nothing was begun."""


@contextmanager
def transaction(
    connection: sqlite3.Connection, *, wait_ms: int | None = None, commit: bool = True
) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` around the block; on any error in the block or in the
    commit, ``ROLLBACK`` and re-raise. With ``commit=False`` it is a scratch transaction, always
    rolled back.

    How long ``BEGIN`` waits for another connection's write lock:

    - ``wait_ms=None``: as long as the connection's busy timeout says (a job run under
      :func:`waiting_for_lock` waits up to the store's ``busy_timeout``);
    - ``wait_ms=0``: not at all;
    - ``wait_ms > 0``: first not at all, then, only if the lock is taken, up to ``wait_ms``.

    :raises WriteLockBusy: ``wait_ms=0`` and the lock is taken (nothing was begun).
    :raises sqlite3.OperationalError: the lock stayed taken for the whole wait ("database is
        locked"), or the driver failed otherwise.
    """
    _begin(connection, wait_ms)
    try:
        yield
        if commit:
            connection.execute("COMMIT")
    except BaseException:
        rollback(connection)
        raise
    if not commit:
        rollback(connection)


def _begin(connection: sqlite3.Connection, wait_ms: int | None) -> None:
    if wait_ms is None:
        connection.execute("BEGIN IMMEDIATE")
    else:
        _now_or_waiting(connection, wait_ms, _execute, "BEGIN IMMEDIATE", ())


def one_statement(
    connection: sqlite3.Connection, sql: str, parameters: tuple[Any, ...], *, wait_ms: int
) -> None:
    """Run one writing statement as its own transaction (the connection is in autocommit):
    SQLite takes the write lock when the statement starts and commits when it ends, all in one
    call, so either all of it is written or nothing. Waits for another connection's write
    lock as :func:`transaction` does: ``wait_ms=0`` not at all, ``wait_ms > 0`` first not at
    all, then, only if the lock is taken, up to ``wait_ms``.

    :raises WriteLockBusy: ``wait_ms=0`` and the lock is taken (nothing was written).
    :raises sqlite3.Error: the lock stayed taken for the whole wait, the statement failed
        (nothing was written), or the driver failed otherwise.
    """
    _now_or_waiting(connection, wait_ms, _execute, sql, parameters)


def _now_or_waiting(
    connection: sqlite3.Connection, wait_ms: int, fn: Callable[..., None], *args: Any
) -> None:
    """Run ``fn(connection, *args)``, one statement that takes the write lock, without waiting
    for it (the writer connection's busy timeout is zero); when another connection holds the
    lock, raise :class:`WriteLockBusy` (``wait_ms <= 0``) or run it again allowing a wait of up
    to ``wait_ms``. The wait costs two more statements, so only a taken lock pays them."""
    try:
        fn(connection, *args)
    except sqlite3.OperationalError as exc:
        if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or connection.in_transaction:
            raise
        if wait_ms <= 0:
            raise WriteLockBusy(str(exc)) from exc
        waiting_for_lock(connection, wait_ms, fn, *args)


def _execute(connection: sqlite3.Connection, sql: str, parameters: tuple[Any, ...]) -> None:
    connection.execute(sql, parameters)


def waiting_for_lock(
    connection: sqlite3.Connection, busy_timeout_ms: int, fn: Callable[..., T], *args: Any
) -> T:
    """Run ``fn(connection, *args)`` allowing waits of up to ``busy_timeout_ms`` for another
    process's lock (the writer thread's calls). The writer connection otherwise waits for
    nothing, so a write on the event loop's thread can never block it for ``busy_timeout``;
    setting it per call here costs the thread, not the loop."""
    connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    try:
        return fn(connection, *args)
    finally:
        connection.execute("PRAGMA busy_timeout = 0")


def rollback(connection: sqlite3.Connection) -> None:
    """Roll back the open transaction, if any; a failed rollback leaves nothing to undo."""
    if connection.in_transaction:
        try:
            connection.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # SQLite already rolled back (e.g. after an I/O error)
