"""What a PostgreSQL schema holds of eventlog's, told without writing to it, and the undoing of
a store made in it by a command that then failed.

Opening a store creates its schema and tables where there are none: what ``open_store`` is
for. A reader that must not write (the command's read commands) asks first, so a mistyped
``?schema=`` does not leave an empty store behind; an import that is refused drops what its
store created, so the database is left as it was found.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from ..._errors import EventLogError
from .._base import STORE_TABLES, TABLE_COLUMNS
from ._errors import DRIVER_ERRORS
from ._sql import quote_ident
from ._url import split_url

__all__ = ("SchemaFound", "drop_created", "holds_store")

_FOUND = """
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = ANY($2::text[])
"""
_SCHEMA = "SELECT count(*) > 0 FROM pg_namespace WHERE nspname = $1"
#: What stops the question being answered: the driver's errors, and a DSN asyncpg refuses.
_UNTOLD: tuple[type[BaseException], ...] = (*DRIVER_ERRORS, ValueError, OverflowError)
#: Seconds to wait for the connection.
_TIMEOUT = 10.0


@dataclass(frozen=True)
class SchemaFound:
    """What :func:`holds_store` found: the schema's name, whether it exists, and which of
    eventlog's table names it holds."""

    schema: str
    exists: bool
    tables: frozenset[str]

    @property
    def holds_store(self) -> bool:
        return not self.tables.isdisjoint(TABLE_COLUMNS)


async def holds_store(url: str) -> SchemaFound | None:
    """What the schema ``url`` names (``?schema=``, else ``public``) holds of eventlog's;
    ``None`` when that cannot be told (a malformed URL, no server, no access): opening the
    store then says what is wrong. Only the catalog is read."""
    try:
        dsn, schema, _ = split_url(url)
    except EventLogError:
        return None
    schema = schema or "public"
    try:
        conn = await asyncpg.connect(dsn, timeout=_TIMEOUT)
        try:
            exists = await conn.fetchval(_SCHEMA, schema)
            names = {row[0] for row in await conn.fetch(_FOUND, schema, list(STORE_TABLES))}
        finally:
            await conn.close()
    except _UNTOLD:
        return None
    return SchemaFound(schema=schema, exists=bool(exists), tables=frozenset(names))


async def drop_created(url: str, before: SchemaFound) -> None:
    """Drop what a store opened at ``url`` created since ``before`` was found: the tables of
    eventlog's names it did not hold, and the schema when it did not exist. Best effort (the
    caller is reporting another failure already): errors are swallowed."""
    dsn, _, _ = split_url(url)
    s = quote_ident(before.schema)
    made = [name for name in STORE_TABLES if name not in before.tables]
    try:
        conn = await asyncpg.connect(dsn, timeout=_TIMEOUT)
        try:
            async with conn.transaction():
                if made:
                    tables = ", ".join(f"{s}.{quote_ident(name)}" for name in made)
                    await conn.execute(f"DROP TABLE IF EXISTS {tables}")
                if not before.exists:
                    await conn.execute(f"DROP SCHEMA IF EXISTS {s} RESTRICT")
        finally:
            await conn.close()
    except _UNTOLD:
        pass
