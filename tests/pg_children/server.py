"""The PostgreSQL server the tests run against, and a fresh schema for each test.

The server is the real one on this machine (``127.0.0.1:5432``, user ``postgres``, trust
auth), or ``EVENTLOG_TEST_POSTGRES_URL``. Tests use the database ``eventlog_test`` (created
when missing) and one schema per test, dropped afterwards, so runs never see each other.
When the server is not reachable the tests fail saying how to start it, unless
``EVENTLOG_SKIP_POSTGRES=1`` is set explicitly.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

__all__ = ("URL", "drop_schema", "fresh_schema", "raw_connection", "require_server", "store_url")

#: The test database (created on first use).
URL = os.environ.get(
    "EVENTLOG_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/eventlog_test"
)
_START = "pg_ctlcluster --skip-systemctl-redirect 15 main start"


def _admin_url() -> str:
    return urlunsplit(urlsplit(URL)._replace(path="/postgres"))


def _database() -> str:
    return urlsplit(URL).path.lstrip("/")


async def _prepare() -> None:
    conn = await asyncpg.connect(_admin_url(), timeout=5)
    try:
        exists = await conn.fetchval(
            "SELECT count(*) > 0 FROM pg_database WHERE datname = $1", _database()
        )
        if not exists:
            try:
                await conn.execute(f'CREATE DATABASE "{_database()}"')
            except (asyncpg.DuplicateDatabaseError, asyncpg.UniqueViolationError):
                pass  # another test run created it a moment ago
    finally:
        await conn.close()


@cache
def _server_problem() -> str | None:
    try:
        asyncio.run(_prepare())
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def require_server() -> None:
    """Fail (or skip, with ``EVENTLOG_SKIP_POSTGRES=1``) when the server is not reachable."""
    problem = _server_problem()
    if problem is None:
        return
    message = (
        f"PostgreSQL is not reachable at {URL} ({problem}). Start it with `{_START}`, "
        "or set EVENTLOG_SKIP_POSTGRES=1 to skip the PostgreSQL tests explicitly."
    )
    if os.environ.get("EVENTLOG_SKIP_POSTGRES") == "1":
        pytest.skip(message)
    pytest.fail(message, pytrace=False)


def store_url(schema: str) -> str:
    """The store URL for ``schema`` in the test database."""
    return f"{URL}?schema={schema}"


async def drop_schema(schema: str) -> None:
    """Drop ``schema`` and everything in it, if it exists."""
    conn = await raw_connection()
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


@contextmanager
def fresh_schema() -> Iterator[str]:
    """A schema name nobody else uses; the schema is dropped on exit."""
    require_server()
    schema = f"t_{os.getpid()}_{uuid.uuid4().hex[:10]}"
    try:
        yield schema
    finally:
        asyncio.run(drop_schema(schema))


async def raw_connection() -> Any:
    """A plain asyncpg connection to the test database (a side door to the raw rows)."""
    return await asyncpg.connect(URL, timeout=10)
