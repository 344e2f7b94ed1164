"""What every command needs: the store URL, the open store, and sessions loaded for reading."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eventlog import EventTypes, open_store
from eventlog.stores import LogStore, SessionRecord

from ..report import Loaded, load_session
from ._errors import CliError
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
    ``create``, a SQLite file must already exist and hold eventlog's tables, and a PostgreSQL
    schema must hold them (a read command never leaves an empty database, schema or tables
    behind a mistyped path, nor writes eventlog's tables into an empty file or another
    application's database).

    :raises CliError: the file does not exist or is a database without eventlog's tables, or
        ``url`` is a ``memory:`` store and not ``create`` (a new process's memory store is
        empty: a read would report nothing).
    :raises StoreNotFoundError: the PostgreSQL schema holds no eventlog tables, not ``create``.
    """
    if url.startswith("memory:") and not create:
        raise CliError(
            f"store URL {url!r} is a new, empty store in every process: there is nothing to "
            "read (name yours with --db sqlite:///path.db or postgresql://…)"
        )
    path = sqlite_path(url)
    if path is not None and not create:
        if not path.exists():
            # The default is the one a newcomer meets without having chosen it (the quickstart
            # writes sessions.db): say how to name theirs.
            chosen = ", the default: name yours with --db URL or $EVENTLOG_DB" * (
                url == DEFAULT_URL
            )
            raise CliError(f"no database at {str(path)!r} (store URL {url!r}{chosen})")
        from eventlog.stores.sqlite import holds_store

        if holds_store(path) is False:
            raise CliError(
                f"{str(path)!r} holds no eventlog store (store URL {url!r}); nothing was "
                "read or written"
            )
    options: dict[str, Any] = {}
    if url.startswith(("postgresql://", "postgres://")) and not create:
        options["create_schema"] = False
    async with open_store(url, types=load_types() if types is None else types, **options) as store:
        yield store


async def stored_record(store: LogStore, session_id: str) -> SessionRecord:
    """The stored record of a session, by a validated id.

    :raises ValidationError: the id is malformed.
    :raises SessionNotFoundError: no such session.
    """
    return await store.record(session_id)
