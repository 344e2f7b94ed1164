"""Driver errors of the PostgreSQL store, translated where they are born.

Every call into asyncpg runs inside :func:`translate`: a server error, a lost connection or a
refused connect becomes a :class:`~eventlog.StoreWriteError` (an ``OSError``) when something
was being written, and an :class:`~eventlog.EventLogError` when something was being read (as
in the SQLite store), naming the store and the session, with the driver's exception chained.
Errors of this library pass through.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import asyncpg

from ..._errors import ClosedError, EventLogError, StoreWriteError

__all__ = ("DRIVER_ERRORS", "is_connection_lost", "translate")

#: What asyncpg and the socket layer raise.
DRIVER_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    OSError,
    TimeoutError,
)

_START_HINT = (
    "is the PostgreSQL server running and reachable? "
    "(on a Debian host: pg_ctlcluster --skip-systemctl-redirect 15 main start)"
)


def is_connection_lost(exc: BaseException) -> bool:
    """True when ``exc`` means the connection is gone (it must be replaced, not reused)."""
    return isinstance(
        exc,
        asyncpg.PostgresConnectionError
        | asyncpg.InterfaceError
        | asyncpg.InternalClientError
        | asyncpg.CannotConnectNowError
        | asyncpg.AdminShutdownError
        | OSError
        | TimeoutError,
    )


@contextmanager
def translate(
    store: str,
    action: str,
    *,
    session_id: str | None = None,
    write: bool = True,
    closed: Callable[[], bool] = lambda: False,
) -> Iterator[None]:
    """Turn driver errors raised inside the block into this library's errors.

    :param store: the store's URL without its password, for the message.
    :param action: what was being done, e.g. ``"writing a batch"``.
    :param write: something was being written (``StoreWriteError``) rather than read.
    :param closed: tells whether the store was closed meanwhile (then the failure is
        reported as :class:`ClosedError`).
    :raises StoreWriteError: the driver failed while writing (the cause is chained).
    :raises EventLogError: the driver failed while reading.
    """
    try:
        yield
    except EventLogError:
        raise
    except DRIVER_ERRORS as exc:
        where = f"session {session_id!r}: " if session_id is not None else ""
        if closed():
            raise ClosedError(f"{where}store {store!r} is closed", session_id=session_id) from exc
        message = f"{where}postgresql store {store!r}: {action} failed: {type(exc).__name__}: {exc}"
        hint = _START_HINT if is_connection_lost(exc) else None
        if write:
            raise StoreWriteError(message, session_id=session_id, hint=hint) from exc
        raise EventLogError(message, session_id=session_id, hint=hint) from exc
