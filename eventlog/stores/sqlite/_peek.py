"""Whether a SQLite file holds an eventlog store, told without writing to it.

Opening a store creates its tables in a file that has none (an empty file, or another
application's database): what ``open_store`` is for. A reader that must not write (the
command's read commands) asks first.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3

from .._base import TABLE_COLUMNS

__all__ = ("holds_store",)


def holds_store(path: str | os.PathLike[str], table_prefix: str = "") -> bool | None:
    """Whether the SQLite file at ``path`` holds one of eventlog's tables (``table_prefix``
    before their names); ``None`` when that cannot be told (not a database, locked, a
    directory, missing): opening it then says what is wrong. Only ``sqlite_master`` is read,
    so the file is left as it is."""
    names = {(table_prefix + name).lower() for name in TABLE_COLUMNS}
    try:
        if os.path.isfile(path) and os.path.getsize(path) == 0:
            return False  # an empty file is an empty database: SQLite would make it one
        if not os.path.isfile(path):
            return None
        with contextlib.closing(sqlite3.connect(path, timeout=0)) as connection:
            rows = connection.execute(
                "SELECT lower(name) FROM sqlite_master WHERE type = 'table'"
            ).fetchall()
    except (sqlite3.Error, OSError):
        return None
    return not names.isdisjoint(name for (name,) in rows)
