"""Driver errors of the SQLite store, translated where they are born."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from ..._errors import CorruptLogError, EventLogError, StoreWriteError

__all__ = ("translated",)

#: SQLite's codes for a file that is damaged or is not a database.
_DAMAGED = frozenset({"SQLITE_CORRUPT", "SQLITE_NOTADB"})


@contextmanager
def translated(
    path: str, action: str, *, write: bool, session_id: str | None = None
) -> Iterator[None]:
    """Turn a driver error into this library's error, chaining the cause.

    :raises CorruptLogError: SQLite says the file is damaged or not a database.
    :raises StoreWriteError: the driver failed while writing (``write``).
    :raises EventLogError: the driver failed while reading.
    """
    try:
        yield
    # OverflowError: a Python int beyond SQLite's 64 bits, bound as a parameter.
    except (sqlite3.Error, OverflowError) as exc:
        message = f"SQLite database {path}: {action} failed: {exc}"
        if getattr(exc, "sqlite_errorname", "") in _DAMAGED:
            raise CorruptLogError(
                message,
                session_id=session_id,
                hint="the file is damaged or is not an eventlog database",
            ) from exc
        if write:
            raise StoreWriteError(message, session_id=session_id) from exc
        raise EventLogError(message, session_id=session_id) from exc
