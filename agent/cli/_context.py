"""What every command needs: the store URL, the open store, and sessions loaded for reading."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from eventlog import EventTypes, open_store
from eventlog.stores import LogStore, SessionRecord

from ..report import Loaded, load_session
from ._errors import CliError
from ._extras import optional
from ._output import Output
from ._registry import load_types

__all__ = (
    "DEFAULT_URL",
    "Context",
    "Loaded",
    "load_session",
    "open_cli_store",
    "resolve_url",
    "stored_record",
    "sqlite_path",
)

#: The store used when neither ``--db`` nor ``EVENTLOG_DB`` names one.
DEFAULT_URL = "sqlite:///eventlog.db"
_SCHEMES = ("memory:", "sqlite:", "postgresql://", "postgres://")


@dataclass(frozen=True)
class Context:
    """What a command runs with: the resolved store URL, the output streams, and the event
    types it reads with (the integrations' and those ``--types`` named)."""

    url: str
    out: Output
    types: EventTypes = field(default_factory=load_types)


def resolve_url(option: str | None, environ: Mapping[str, str] = os.environ) -> str:
    """The store URL from ``--db``, else ``EVENTLOG_DB``, else :data:`DEFAULT_URL`.

    A bare file path (no scheme) means a SQLite file: ``runs.db`` is ``sqlite:///runs.db``.
    """
    url = option or environ.get("EVENTLOG_DB") or DEFAULT_URL
    if "://" not in url and not url.startswith(_SCHEMES):
        return "sqlite:///" + url
    return url


def sqlite_path(url: str) -> Path | None:
    """The file a ``sqlite:`` URL names, or ``None`` for other stores."""
    if not url.startswith("sqlite:"):
        return None
    from eventlog.stores.sqlite import parse_sqlite_url

    return Path(parse_sqlite_url(url))


@asynccontextmanager
async def open_cli_store(
    url: str, *, create: bool = False, types: EventTypes | None = None
) -> AsyncIterator[LogStore]:
    """Open the store at ``url`` reading with ``types`` (default: :func:`load_types`); unless
    ``create``, a SQLite file must already exist and hold eventlog's tables, and so must a
    PostgreSQL schema (a read command never leaves an empty database behind a mistyped path
    or schema, nor writes eventlog's tables into an empty file or another application's
    database).

    :raises CliError: the file does not exist, or is a database without eventlog's tables; a
        PostgreSQL schema without them; a PostgreSQL URL without the ``postgres`` extra.
    """
    if url.startswith(("postgresql://", "postgres://")):
        optional("asyncpg", "postgres", "a postgresql:// store")
        if not create:
            from eventlog.stores.postgres import holds_store as schema_holds_store

            found = await schema_holds_store(url)
            if found is not None and not found.holds_store:
                raise CliError(
                    f"PostgreSQL schema {found.schema!r} holds no eventlog store (no eventlog "
                    "table); nothing was read or written"
                )
    path = sqlite_path(url)
    if path is not None and not create:
        if not path.exists():
            raise CliError(f"no database at {str(path)!r} (store URL {url!r})")
        from eventlog.stores.sqlite import holds_store

        if holds_store(path) is False:
            raise CliError(
                f"{str(path)!r} holds no eventlog store (store URL {url!r}); nothing was "
                "read or written"
            )
    async with open_store(url, types=load_types() if types is None else types) as store:
        yield store


async def stored_record(store: LogStore, session_id: str) -> SessionRecord:
    """The stored record of a session, by a validated id.

    :raises ValidationError: the id is malformed.
    :raises SessionNotFoundError: no such session.
    """
    return await store.record(session_id)
