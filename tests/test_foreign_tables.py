"""A database that already holds another application's ``meta``, ``sessions`` or ``events``
table is refused before anything is created; SQLite's ``table_prefix=`` (PostgreSQL's
``schema=``) gives eventlog tables of its own beside them."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from eventlog import (
    APPEND,
    Message,
    StoreNotFoundError,
    UnsupportedFormatError,
    UserMessage,
    ValidationError,
    open_store,
)
from tests.pg_children.server import fresh_schema, raw_connection, store_url

pytestmark = pytest.mark.anyio

FOREIGN = {
    "sessions": "CREATE TABLE sessions (token TEXT PRIMARY KEY, user_id INTEGER)",
    "meta": "CREATE TABLE meta (key TEXT, value TEXT)",
    "events": "CREATE TABLE events (id INTEGER PRIMARY KEY, kind TEXT, payload TEXT)",
}


def tables(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        found = db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    db.close()
    return sorted(name for (name,) in found)


@pytest.mark.parametrize("table", sorted(FOREIGN))
async def test_sqlite_refuses_another_applications_table(tmp_path: Path, table: str) -> None:
    # An app's database with one table of a name eventlog uses, holding the app's data.
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as db:
        db.execute(FOREIGN[table])
    db.close()
    # Refused on start, naming the table and the way out; nothing was created.
    with pytest.raises(UnsupportedFormatError) as caught:
        async with open_store(f"sqlite:///{path}"):
            pass
    assert caught.value.message == (
        f"SQLite database {path} already holds table(s) {table} that are not eventlog's; "
        "nothing was created"
    )
    assert caught.value.hint is not None and "table_prefix=" in caught.value.hint
    assert tables(path) == [table]
    # With a prefix the store lives beside the app's table, which it never touches.
    url = f"sqlite:///{path}"
    async with open_store(url, table_prefix="eventlog_") as store:
        session = await store.create(session_id="s")
        session.append("user/message", UserMessage(message=Message.user("hi")), surface=APPEND)
        await session.aclose()
    assert tables(path) == sorted([table, "eventlog_events", "eventlog_meta", "eventlog_sessions"])
    async with open_store(url, table_prefix="eventlog_") as store:
        assert [e.type async for e in store.read("s")] == ["user/message"]
    # The unprefixed store is still refused (the app's table is still not eventlog's).
    with pytest.raises(UnsupportedFormatError):
        async with open_store(url):
            pass


async def test_sqlite_refuses_half_made_tables(tmp_path: Path) -> None:
    # eventlog's events table alone (the others dropped by hand): not a store to write into.
    path = tmp_path / "half.db"
    async with open_store(f"sqlite:///{path}"):
        pass
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE meta")
    db.close()
    with pytest.raises(UnsupportedFormatError, match=r"table\(s\) events, sessions"):
        async with open_store(f"sqlite:///{path}"):
            pass


@pytest.mark.parametrize("prefix", ["1abc", "a-b", "a b", "x" * 33, 'a"', 5, None])
def test_sqlite_table_prefix_is_validated(tmp_path: Path, prefix: object) -> None:
    with pytest.raises(ValidationError, match="table_prefix must be a letter followed by"):
        open_store(f"sqlite:///{tmp_path / 's.db'}", table_prefix=prefix)


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema() as name:
        yield name


@pytest.mark.postgres
async def test_postgres_refuses_another_applications_table(schema: str) -> None:
    # The schema holds an app's `events` table.
    conn = await raw_connection()
    try:
        await conn.execute(f'CREATE SCHEMA "{schema}"')
        await conn.execute(f'CREATE TABLE "{schema}".events (id bigint, kind text)')
        with pytest.raises(UnsupportedFormatError) as caught:
            async with open_store(store_url(schema)):
                pass
        assert f"schema {schema!r} already holds table(s) events that are not eventlog's" in (
            caught.value.message
        )
        # Nothing was created beside it.
        found = await conn.fetch(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = $1", schema
        )
        assert [r[0] for r in found] == ["events"]
    finally:
        await conn.close()


async def _schema_exists(conn: object, schema: str) -> bool:
    found: bool = await conn.fetchval(  # type: ignore[attr-defined]
        "SELECT count(*) > 0 FROM pg_namespace WHERE nspname = $1", schema
    )
    return found


@pytest.mark.postgres
async def test_postgres_without_create_schema_creates_nothing(schema: str) -> None:
    # A reader pointed at a schema that is not there (a mistyped ?schema=) is refused, and the
    # schema is still not there afterwards.
    conn = await raw_connection()
    try:
        with pytest.raises(StoreNotFoundError) as caught:
            async with open_store(store_url(schema), create_schema=False):
                pass
        assert caught.value.message.endswith(
            f"schema {schema!r} holds no eventlog tables; nothing was created"
        )
        assert not await _schema_exists(conn, schema)
        # An empty schema of that name (an app's, say): still nothing created in it.
        await conn.execute(f'CREATE SCHEMA "{schema}"')
        with pytest.raises(StoreNotFoundError):
            async with open_store(store_url(schema), create_schema=False):
                pass
        found = await conn.fetch(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = $1", schema
        )
        assert found == []
        # Once a writer made the store, the reader opens it.
        async with open_store(store_url(schema)) as store:
            await store.create(session_id="s")
        async with open_store(store_url(schema), create_schema=False) as store:
            assert [info.id for info in await store.list()] == ["s"]
    finally:
        await conn.close()


def test_create_schema_is_validated() -> None:
    with pytest.raises(ValidationError, match="create_schema must be True or False, got 'no'"):
        open_store("postgresql://u@127.0.0.1:1/db", create_schema="no")


# -- the attachments table, made with the first attachment -------------------------------------


async def test_sqlite_attachments_live_under_the_table_prefix(tmp_path: Path) -> None:
    # Another application's attachments table sits in the file; a prefixed store keeps its own.
    path = tmp_path / "shared.db"
    with closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE attachments (name TEXT, blob BLOB)")
        db.commit()
    async with open_store(f"sqlite:///{path}", table_prefix="el_") as store:
        digest = await store.put_attachment(b"\x89PNG fake")
        assert await store.get_attachment(digest) == b"\x89PNG fake"
    with closing(sqlite3.connect(path)) as db:
        # The other application's table was not touched; ours has the prefix.
        assert db.execute("SELECT count(*) FROM attachments").fetchone() == (0,)
        assert db.execute("SELECT count(*) FROM el_attachments").fetchone() == (1,)


async def test_sqlite_refuses_a_foreign_attachments_table_beside_its_own(tmp_path: Path) -> None:
    path = tmp_path / "mixed.db"
    async with open_store(f"sqlite:///{path}") as store:
        await store.create(session_id="s")
    with closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE attachments (name TEXT, blob BLOB)")
        db.commit()
    with pytest.raises(UnsupportedFormatError, match="attachments"):
        async with open_store(f"sqlite:///{path}"):
            pass


@pytest.mark.postgres
async def test_postgres_refuses_a_foreign_attachments_table(schema: str) -> None:
    # The store's tables exist; then another application puts its `attachments` table beside.
    async with open_store(store_url(schema)) as store:
        await store.create(session_id="s")
    conn = await raw_connection()
    try:
        await conn.execute(f'CREATE TABLE "{schema}".attachments (name text, blob bytea)')
    finally:
        await conn.close()
    with pytest.raises(UnsupportedFormatError, match="attachments"):
        async with open_store(store_url(schema)):
            pass
