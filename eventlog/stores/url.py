"""``open_store(url, **options)``: the one entry point to every store."""

from __future__ import annotations

from typing import Any

from ..errors import ValidationError
from ..registry import EventTypes
from .base import Backend
from .logstore import LogStore
from .memory import MemoryBackend, MemoryData

__all__ = ("open_store",)

_STORE_OPTIONS = ("types", "write_delay", "max_pending_bytes", "max_event_bytes")


def open_store(url: str, **options: Any) -> LogStore:
    """The store at ``url``, to be used as ``async with open_store(url) as store:``.

    URLs: ``memory:``; ``sqlite:///relative/or/absolute/path.db``;
    ``postgresql://user@host:port/database``.

    Store options: ``types`` (an :class:`EventTypes`), ``write_delay`` (seconds, default 0.01),
    ``max_pending_bytes`` (default 64 MiB), ``max_event_bytes`` (default 8 MiB).

    Backend options: ``durability`` (``"power-loss"`` default, or ``"process-crash"``) for
    SQLite and PostgreSQL; for SQLite also ``busy_timeout`` (seconds, default 30),
    ``poll_interval`` (seconds, default 0.05), ``inline_write_bytes`` (default 256 KiB) and
    ``table_prefix`` (put before the table names, default none);
    ``data`` (a :class:`MemoryData`) for ``memory:``; for PostgreSQL also ``lease_ttl``
    (seconds a writer lease outlives its host, default 10), ``schema`` (default ``public``, or
    ``?schema=`` in the URL), ``pool_size``, ``connect_timeout`` and ``command_timeout``.

    :raises ValidationError: the URL's scheme is not supported or an option is unknown.
    """
    if not isinstance(url, str):
        raise ValidationError(f"store URL must be a string, got {type(url).__name__}")
    store_options = {k: options.pop(k) for k in _STORE_OPTIONS if k in options}
    types = store_options.get("types")
    if types is not None and not isinstance(types, EventTypes):
        raise ValidationError("option types must be an EventTypes registry")
    backend = _backend_for(url, options)
    # A PostgreSQL URL may carry a password: reprs and messages show it masked.
    shown = getattr(backend, "display_url", url)
    return LogStore(backend, url=shown, **store_options)


def _backend_for(url: str, options: dict[str, Any]) -> Backend:
    if url == "memory:" or url.startswith("memory:"):
        data = options.pop("data", None)
        _no_more(url, options)
        if data is not None and not isinstance(data, MemoryData):
            raise ValidationError("option data must be a MemoryData")
        return MemoryBackend(data)
    if url.startswith("sqlite:"):
        from .sqlite import SQLITE_OPTIONS, SQLiteBackend, parse_sqlite_url

        known = {k: options.pop(k) for k in SQLITE_OPTIONS if k in options}
        _no_more(url, options)
        return SQLiteBackend(parse_sqlite_url(url), **known)
    if url.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresBackend

        return PostgresBackend(url, **options)
    raise ValidationError(
        f"unsupported store URL {url!r}: use 'memory:', 'sqlite:///path.db' or "
        "'postgresql://user@host:port/db'"
    )


def _no_more(url: str, options: dict[str, Any]) -> None:
    if options:
        raise ValidationError(f"unknown option(s) for {url!r}: {', '.join(sorted(options))}")
