"""The SQLite backend: ``sqlite:///path.db``, the embedded default store.

One file holds many sessions; its implementation (the write rounds, the schema, the writer
thread) lives in this package's private modules. See docs/stores.md.
"""

from ._backend import SQLITE_OPTIONS, SQLiteBackend, parse_sqlite_url
from ._peek import drop_created, holds_store, store_tables

__all__ = (
    "SQLITE_OPTIONS",
    "SQLiteBackend",
    "drop_created",
    "holds_store",
    "parse_sqlite_url",
    "store_tables",
)
