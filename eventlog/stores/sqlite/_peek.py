"""What a SQLite file holds of eventlog's, told without writing to it, and the undoing of a
store made in it by a command that then failed.

Opening a store creates its tables in a file that has none (an empty file, or another
application's database): what ``open_store`` is for. A reader that must not write (the
command's read commands) asks first; an import that is refused drops the tables its store
created in another application's database.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3

from .._base import STORE_TABLES, TABLE_COLUMNS

__all__ = ("drop_created", "holds_store", "store_tables")


def store_tables(path: str | os.PathLike[str]) -> frozenset[str] | None:
    """Which of eventlog's table names the SQLite file at ``path`` holds (none for an empty
    file); ``None`` when that cannot be told (not a database, locked, a directory, missing).
    Only ``sqlite_master`` is read, so the file is left as it is."""
    try:
        if not os.path.isfile(path):
            return None
        if os.path.getsize(path) == 0:
            return frozenset()  # an empty file is an empty database: SQLite would make it one
        with contextlib.closing(sqlite3.connect(path, timeout=0)) as connection:
            rows = connection.execute(
                "SELECT lower(name) FROM sqlite_master WHERE type = 'table'"
            ).fetchall()
    except (sqlite3.Error, OSError):
        return None
    return frozenset(name for (name,) in rows if name in STORE_TABLES)


def holds_store(path: str | os.PathLike[str]) -> bool | None:
    """Whether the SQLite file at ``path`` holds one of eventlog's tables; ``None`` when that
    cannot be told (opening it then says what is wrong)."""
    tables = store_tables(path)
    return None if tables is None else not tables.isdisjoint(TABLE_COLUMNS)


def drop_created(path: str | os.PathLike[str], before: frozenset[str]) -> None:
    """Drop the tables of eventlog's names the file at ``path`` did not hold ``before`` (what
    :func:`store_tables` said then). The other tables' rows are as they were; the file's
    bytes are not (SQLite keeps the freed pages). Best effort: errors are swallowed (the
    caller is reporting another failure already)."""
    made = [name for name in STORE_TABLES if name not in before]
    try:
        with contextlib.closing(sqlite3.connect(path, timeout=5)) as connection:
            for name in made:
                connection.execute(f'DROP TABLE IF EXISTS "{name}"')
            connection.commit()
    except (sqlite3.Error, OSError):
        pass
