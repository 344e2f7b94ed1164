"""Whether a PostgreSQL schema holds an eventlog store, told without writing to it.

Opening a store creates its schema and tables where there are none: what ``open_store`` is
for. A reader that must not write (the command's read commands) asks first, so a mistyped
``?schema=`` does not leave an empty store behind.
"""

from __future__ import annotations

import asyncpg

from ..._errors import EventLogError
from .._base import TABLE_COLUMNS
from ._errors import DRIVER_ERRORS
from ._url import split_url

__all__ = ("holds_store",)

_FOUND = """
SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = ANY($2::text[])
"""


#: What stops the question being answered: the driver's errors, and a DSN asyncpg refuses.
_UNTOLD: tuple[type[BaseException], ...] = (*DRIVER_ERRORS, ValueError, OverflowError)
#: Seconds to wait for the connection.
_TIMEOUT = 10.0


async def holds_store(url: str) -> tuple[bool | None, str]:
    """``(holds, schema)``: whether the schema ``url`` names (``?schema=``, else ``public``)
    holds one of eventlog's tables; ``holds`` is ``None`` when that cannot be told (a
    malformed URL, no server, no access): opening the store then says what is wrong. Only
    the catalog is read."""
    try:
        dsn, schema, _ = split_url(url)
    except EventLogError:
        return None, ""
    schema = schema or "public"
    try:
        conn = await asyncpg.connect(dsn, timeout=_TIMEOUT)
        try:
            found = await conn.fetchval(_FOUND, schema, list(TABLE_COLUMNS))
        finally:
            await conn.close()
    except _UNTOLD:
        return None, schema
    return found > 0, schema
