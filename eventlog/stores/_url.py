"""``open_store(url, **options)``: the one entry point to every store."""

from __future__ import annotations

from typing import Any

from .._errors import ValidationError
from .._extras import needs_extra
from .._registry import EventTypes
from .._strict import check_int, check_number, check_text, has_surrogate
from ._base import Backend, MaskedUrl
from ._logstore import LogStore
from ._memory import MemoryBackend, MemoryData

__all__ = ("open_store",)

_STORE_OPTIONS = (
    "types",
    "write_delay",
    "max_pending_bytes",
    "max_event_bytes",
    "max_nesting",
    "snapshot_every",
    "trim_every",
    "snapshot_states",
)


def open_store(url: str, **options: Any) -> LogStore:
    """The store at ``url``, to be used as ``async with open_store(url) as store:``.

    URLs: ``memory:``; ``sqlite:///relative/or/absolute/path.db``;
    ``postgresql://user@host:port/database``.

    Store options: ``types`` (an :class:`EventTypes`), ``write_delay`` (seconds, default 0.01),
    ``max_pending_bytes`` (default 64 MiB), ``max_event_bytes`` (default 8 MiB), ``max_nesting``
    (default 64: how deep containers may nest in a payload or in metadata; at most 256),
    ``snapshot_every`` (default 4000: a snapshot after that many events and after each
    compaction; 0 turns snapshots off; docs/stores.md), ``trim_every`` (default 10000: a
    session open for writing drops from memory, at a snapshot, the events it covers that are
    not on the surface, once this many have gathered; 0 keeps them until it is closed),
    ``snapshot_states`` (the projection states snapshots carry: a sequence of
    :class:`~eventlog.SnapshotState`, or a ``"module:attribute"`` reference to one; default
    ``"projections:SNAPSHOT_STATES"``, the projections' timeline, inbox and request header,
    resolved when the store is built; ``()`` for none; docs/stores.md).

    Backend options: ``durability`` (``"power-loss"`` default, or ``"process-crash"``) for
    SQLite and PostgreSQL; for SQLite also ``busy_timeout`` (seconds, default 30),
    ``poll_interval`` (seconds, default 0.05), ``inline_write_bytes`` (default 256 KiB) and
    ``table_prefix`` (put before the table names, default none);
    ``data`` (a :class:`MemoryData`) for ``memory:``; for PostgreSQL also ``lease_ttl``
    (seconds a writer lease outlives its host, default 10), ``schema`` (default ``public``, or
    ``?schema=`` in the URL), ``pool_size``, ``connect_timeout`` and ``command_timeout``.

    :raises ValidationError: the URL's scheme is not supported, or an option is unknown, of
        the wrong type or out of range (numbers: finite, not ``bool``; ``write_delay`` 0 to
        3600 s; byte counts and ``max_nesting`` at least 1).
    """
    if not isinstance(url, str):
        raise ValidationError(f"store URL must be a string, got {type(url).__name__}")
    if has_surrogate(url):
        raise ValidationError(f"store URL {url!r} holds a lone surrogate (no UTF-8 form)")
    _check_backend_options(options)
    store_options = {k: options.pop(k) for k in _STORE_OPTIONS if k in options}
    types = store_options.get("types")
    if types is not None and not isinstance(types, EventTypes):
        raise ValidationError("option types must be an EventTypes registry")
    backend = _backend_for(url, options)
    # A PostgreSQL URL may carry a password: reprs and messages show it masked.
    shown = backend.display_url if isinstance(backend, MaskedUrl) else url
    return LogStore(backend, url=shown, **store_options)


#: Backend options and their accepted ranges (seconds or counts), checked before any backend
#: is built so a wrong type never escapes as a TypeError later.
_SECONDS = ("busy_timeout", "poll_interval", "lease_ttl", "connect_timeout")
_DAY = 86_400.0


def _check_backend_options(options: dict[str, Any]) -> None:
    durability = options.get("durability", "power-loss")
    if not isinstance(durability, str) or durability not in ("power-loss", "process-crash"):
        raise ValidationError(
            f"durability must be 'power-loss' or 'process-crash', got {durability!r}"
        )
    for name in _SECONDS:
        if name in options:
            _check_seconds(name, options[name])
    if options.get("command_timeout") is not None:
        _check_seconds("command_timeout", options["command_timeout"])
    inline = options.get("inline_write_bytes", 0)
    if not check_int(inline, 0):
        raise ValidationError(
            f"inline_write_bytes must be a whole number of bytes >= 0, got {inline!r}"
        )
    if "pool_size" in options:
        check_number("pool_size", options["pool_size"], low=1, high=1000, integer=True)
    schema = options.get("schema")
    if schema is not None and not check_text(schema):
        raise ValidationError(f"option schema must be a string, got {schema!r}")


def _check_seconds(name: str, value: object) -> None:
    if type(value) not in (int, float) or not 0 < value <= _DAY:  # type: ignore[operator]
        raise ValidationError(
            f"{name} must be a positive number of seconds (at most {_DAY:.0f}), got {value!r}"
        )


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
        with needs_extra("postgres", "a postgresql:// store", "asyncpg"):
            from .postgres import PostgresBackend

        return PostgresBackend(url, **options)
    raise ValidationError(
        f"unsupported store URL {url!r}: use 'memory:', 'sqlite:///path.db' or "
        "'postgresql://user@host:port/db'"
    )


def _no_more(url: str, options: dict[str, Any]) -> None:
    if options:
        raise ValidationError(f"unknown option(s) for {url!r}: {', '.join(sorted(options))}")
