"""The tables a store makes later, with its first attachment and its first snapshot: another
application's object of one of their names (a table with other columns, a view, an index, a
type) is refused when the store starts, on SQLite and on PostgreSQL alike, before anything is
created; and a snapshot row whose values are not of their columns' types is reported and
replayed past, never trusted."""

from __future__ import annotations

import logging
import sqlite3
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from eventlog import CorruptLogError, UnsupportedFormatError, open_store
from tests.pg_children.server import fresh_schema, raw_connection, store_url
from tests.test_snapshots import TurnPlan, state_of, write

pytestmark = pytest.mark.anyio

#: Three compacting turns: with snapshot_every=5 the session has a snapshot when it closes.
PLANS = [TurnPlan(calls=(1,), header=False, queued=False, compact=True)] * 3


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema() as name:
        yield name


async def relations(schema: str) -> list[str]:
    """The names of every relation in ``schema`` (tables, views, indexes ...)."""
    conn = await raw_connection()
    try:
        found = await conn.fetch(
            "SELECT c.relname::text FROM pg_class AS c JOIN pg_namespace AS n"
            " ON n.oid = c.relnamespace WHERE n.nspname = $1",
            schema,
        )
    finally:
        await conn.close()
    return sorted(r[0] for r in found)


async def sql(*statements: str) -> None:
    conn = await raw_connection()
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


def sqlite_objects(path: Path) -> list[tuple[str, str]]:
    with closing(sqlite3.connect(path)) as db:
        found = db.execute("SELECT type, name FROM sqlite_master").fetchall()
    return sorted(found)


# -- PostgreSQL: the snapshots table ------------------------------------------------------------


@pytest.mark.postgres
async def test_postgres_refuses_a_foreign_snapshots_table_beside_its_own(schema: str) -> None:
    # The store's tables exist; then another application puts its `snapshots` table beside.
    url = store_url(schema)
    async with open_store(url) as store:
        await store.create(session_id="s")
    await sql(f'CREATE TABLE "{schema}".snapshots (id bigint PRIMARY KEY, taken_at bigint)')
    before = await relations(schema)
    # Refused on start, naming that table only (the others are eventlog's), and the way out.
    with pytest.raises(UnsupportedFormatError) as caught:
        async with open_store(url):
            pass
    assert caught.value.message == (
        f"postgresql store {url!r}: schema {schema!r} already holds table(s) snapshots that "
        "are not eventlog's; nothing was created"
    )
    assert caught.value.hint is not None and "schema=" in caught.value.hint
    assert await relations(schema) == before


@pytest.mark.postgres
async def test_postgres_refuses_a_schema_holding_only_a_foreign_snapshots_table(
    schema: str,
) -> None:
    # A schema of another application's with a `snapshots` table and nothing else.
    await sql(
        f'CREATE SCHEMA "{schema}"',
        f'CREATE TABLE "{schema}".snapshots (session_id text, taken_at bigint)',
    )
    with pytest.raises(UnsupportedFormatError, match=r"table\(s\) snapshots that are not"):
        async with open_store(store_url(schema)):
            pass
    # Nothing was created beside it.
    assert await relations(schema) == ["snapshots"]


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("name", "statement"),
    [
        # A view with eventlog's very columns: not a table a snapshot can be stored in.
        (
            "snapshots",
            "CREATE VIEW {s}.snapshots AS SELECT 'x'::text AS session_id, 0::bigint AS seq,"
            " ''::bytea AS hash, ''::bytea AS data",
        ),
        # An index of the name: CREATE TABLE IF NOT EXISTS would skip it silently.
        ("attachments", "CREATE INDEX attachments ON {s}.events (time)"),
        # A sequence of the name.
        ("snapshots", "CREATE SEQUENCE {s}.snapshots"),
        # An enum of the name: CREATE TABLE would fail on it ("type ... already exists").
        ("snapshots", "CREATE TYPE {s}.snapshots AS ENUM ('a', 'b')"),
        # A table with no columns at all.
        ("attachments", "CREATE TABLE {s}.attachments ()"),
    ],
    ids=["view", "index", "sequence", "enum", "no-columns"],
)
async def test_postgres_refuses_any_foreign_object_of_a_later_tables_name(
    schema: str, name: str, statement: str
) -> None:
    url = store_url(schema)
    async with open_store(url) as store:
        await store.create(session_id="s")
    await sql(statement.format(s=f'"{schema}"'))
    with pytest.raises(UnsupportedFormatError) as caught:
        async with open_store(url):
            pass
    assert f"already holds table(s) {name} that are not eventlog's" in caught.value.message


@asynccontextmanager
async def roles(schema: str) -> AsyncIterator[tuple[str, str]]:
    """Two login roles, an app's and another's, both allowed to create in ``schema``;
    dropped afterwards with what they own."""
    tag = uuid.uuid4().hex[:8]
    app, other = f"el_app_{tag}", f"el_other_{tag}"
    await sql(
        f"CREATE ROLE {app} LOGIN",
        f"CREATE ROLE {other} LOGIN",
        f'CREATE SCHEMA "{schema}"',
        f'GRANT USAGE, CREATE ON SCHEMA "{schema}" TO {app}, {other}',
    )
    try:
        yield app, other
    finally:
        await sql(f'DROP SCHEMA "{schema}" CASCADE', f"DROP ROLE {app}", f"DROP ROLE {other}")


def as_role(url: str, role: str) -> str:
    """``url`` with ``role`` as its user (trust auth: no password)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{role}@{host}"))


@pytest.mark.postgres
async def test_postgres_sees_a_foreign_table_its_role_has_no_privilege_on(schema: str) -> None:
    # The store runs as an unprivileged role; another role owns a `snapshots` table in the
    # same schema and grants nothing on it (information_schema would not show it at all).
    async with roles(schema) as (app, other):
        conn = await raw_connection()
        try:
            await conn.execute(f"SET ROLE {other}")
            await conn.execute(f'CREATE TABLE "{schema}".snapshots (id bigint)')
        finally:
            await conn.close()
        url = as_role(store_url(schema), app)
        with pytest.raises(UnsupportedFormatError, match=r"table\(s\) snapshots that are not"):
            async with open_store(url):
                pass
        assert await relations(schema) == ["snapshots"]


# -- SQLite: indexes and views of the names ----------------------------------------------------


@pytest.mark.parametrize(
    ("name", "statement"),
    [
        ("snapshots", "CREATE INDEX snapshots ON events (time)"),
        ("attachments", "CREATE INDEX Attachments ON events (time)"),  # names ignore case
        (
            "snapshots",
            "CREATE VIEW snapshots AS SELECT 'x' AS session_id, 0 AS seq, x'' AS hash, x'' AS data",
        ),
    ],
    ids=["index", "index-case", "view"],
)
async def test_sqlite_refuses_an_index_or_view_of_a_later_tables_name(
    tmp_path: Path, name: str, statement: str
) -> None:
    path = tmp_path / "app.db"
    async with open_store(f"sqlite:///{path}") as store:
        await store.create(session_id="s")
    with closing(sqlite3.connect(path)) as db:
        db.execute(statement)
        db.commit()
    before = sqlite_objects(path)
    with pytest.raises(UnsupportedFormatError) as caught:
        async with open_store(f"sqlite:///{path}"):
            pass
    assert caught.value.message == (
        f"SQLite database {path} already holds table(s) {name} that are not eventlog's; "
        "nothing was created"
    )
    assert sqlite_objects(path) == before


async def test_sqlite_names_only_the_foreign_table_beside_its_own(tmp_path: Path) -> None:
    path = tmp_path / "mixed.db"
    async with open_store(f"sqlite:///{path}") as store:
        await store.create(session_id="s")
    with closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE snapshots (id INTEGER PRIMARY KEY, taken_at INTEGER)")
        db.commit()
    with pytest.raises(UnsupportedFormatError) as caught:
        async with open_store(f"sqlite:///{path}"):
            pass
    assert caught.value.message == (
        f"SQLite database {path} already holds table(s) snapshots that are not eventlog's; "
        "nothing was created"
    )


# -- a snapshot row of the wrong shape ----------------------------------------------------------


async def test_sqlite_a_snapshot_row_of_the_wrong_types_is_reported_and_replayed_past(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A compacted session with its snapshot; then its row is rewritten with text and a number
    # where eventlog stores bytes (SQLite keeps whatever type it is given).
    path = tmp_path / "altered.db"
    async with open_store(f"sqlite:///{path}", snapshot_every=5) as store:
        written = await write(store, PLANS, crash=False)
    with closing(sqlite3.connect(path)) as db:
        assert db.execute("SELECT count(*) FROM snapshots").fetchone() == (1,)
        db.execute("UPDATE snapshots SET hash = 7, data = 'not a snapshot'")
        db.commit()
    # Open reports it and replays the log; the session is exactly what was written.
    async with open_store(f"sqlite:///{path}", snapshot_every=5) as store:
        with caplog.at_level(logging.WARNING, logger="eventlog.store"):
            reopened = await store.open("s")
        assert reopened.snapshot_seq is None and reopened.loaded_from == 0
        assert reopened.snapshot_fault is not None
        assert reopened.snapshot_fault.startswith(
            "snapshot not read: session 's': the stored snapshot row is not eventlog's "
            "(seq, hash, data are int, int, str; expected int, bytes, bytes)"
        )
        assert state_of(reopened) == written
        assert "replaying the whole log" in caplog.text
        # The side door says the same, as a typed error.
        with pytest.raises(CorruptLogError, match="not eventlog's"):
            await store.stored_snapshot("s")


@pytest.mark.postgres
async def test_postgres_a_snapshots_table_of_other_column_types_is_never_trusted(
    schema: str,
) -> None:
    # Another application's `snapshots` table has eventlog's column names (so the check on
    # start, by names as on SQLite, lets it pass) but text where eventlog stores bytes, and a
    # row for the session.
    url = store_url(schema)
    async with open_store(url, snapshot_every=0) as store:
        written = await write(store, PLANS, crash=False)
    await sql(
        f'CREATE TABLE "{schema}".snapshots (session_id text PRIMARY KEY, seq bigint,'
        " hash text, data text)",
        f"INSERT INTO \"{schema}\".snapshots VALUES ('s', 3, 'h', 'd')",
    )
    options: dict[str, Any] = {"snapshot_every": 5, "lease_ttl": 5.0}
    async with open_store(url, **options) as store:
        reopened = await store.open("s")
        # Reported, replayed past: the session is what was written.
        assert reopened.snapshot_seq is None
        assert reopened.snapshot_fault is not None and (
            "the stored snapshot row is not eventlog's (seq, hash, data are int, str, str"
            in reopened.snapshot_fault
        )
        assert state_of(reopened) == written
        await reopened.aclose()
