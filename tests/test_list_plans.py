"""A page of ``list`` is an index range stopped at its limit, on SQLite and on PostgreSQL.

The time of a page is a benchmark figure (``python -m benchmarks sqlite`` and ``postgres``: the
first page of 100 sessions with 10,000 sessions stored against 100). What a test can hold is
why it is flat: the databases' own query plans walk the sessions' primary key in id order (no
sort of all sessions, no scan of the events table) and find each listed session's last event
by its primary key.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from eventlog import open_store
from eventlog.stores.postgres._sql import Statements
from eventlog.stores.sqlite._ops import _FIRST_INFOS, _INFOS_AFTER
from tests.pg_children.server import fresh_schema, raw_connection, store_url

pytestmark = pytest.mark.anyio


async def _sqlite_store_of(path: Path, count: int) -> None:
    async with open_store(f"sqlite:///{path}") as store:
        for n in range(count):
            session = await store.create(session_id=f"s{n:04}")
            await session.aclose()


def _sqlite_plan(path: Path, sql: str, params: tuple[Any, ...]) -> list[str]:
    db = sqlite3.connect(path)
    try:
        rows = db.execute("EXPLAIN QUERY PLAN " + sql.replace("{p}", ""), params).fetchall()
    finally:
        db.close()
    return [row[3] for row in rows]


async def test_a_sqlite_page_walks_the_session_index_and_probes_events_by_key(
    tmp_path: Path,
) -> None:
    path = tmp_path / "plans.db"
    await _sqlite_store_of(path, 20)
    # The first page: the sessions' primary-key index walked in order, stopped at the limit.
    first = _sqlite_plan(path, _FIRST_INFOS, (5,))
    assert first[0] == "SCAN s USING INDEX sqlite_autoindex_sessions_1"
    # A later page starts at ``after`` in that index: the sessions before it are not visited.
    later = _sqlite_plan(path, _INFOS_AFTER, (5, "s0007"))
    assert later[0] == "SEARCH s USING INDEX sqlite_autoindex_sessions_1 (id>?)"
    for plan in (first, later):
        # Each listed session's last event by its key; nothing sorted, the events never scanned.
        assert plan[1].startswith(
            "SEARCH e USING INDEX sqlite_autoindex_events_1 (session_id=? AND seq=?)"
        )
        assert not [step for step in plan if "TEMP B-TREE" in step or step.startswith("SCAN e")]


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema() as name:
        yield name


def _nodes(plan: Any) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", ()):
        yield from _nodes(child)


@pytest.mark.postgres
async def test_a_postgres_page_walks_the_session_key_and_probes_events_by_key(
    schema: str,
) -> None:
    async with open_store(store_url(schema)) as store:
        await (await store.create(session_id="s0000")).aclose()
    conn = await raw_connection()
    try:
        # Enough sessions (side door: plain rows) that the planner's choice is the one a big
        # store gets: a sequential scan and a sort would be cheaper for a handful.
        await conn.execute(
            f'INSERT INTO "{schema}".sessions (id, created_at, head) '
            "SELECT 's' || lpad(n::text, 5, '0'), n, 2 FROM generate_series(1, 20000) AS n"
        )
        await conn.execute(
            f'INSERT INTO "{schema}".events '
            "(session_id, seq, type, time, surface, sources, ignorable, data, hash) "
            "SELECT 's' || lpad(n::text, 5, '0'), seq, 'user/message', n, NULL, '[]', false, "
            "'{}', '\\x00' FROM generate_series(1, 20000) AS n, generate_series(0, 2) AS seq"
        )
        await conn.execute(f'ANALYZE "{schema}".sessions')
        await conn.execute(f'ANALYZE "{schema}".events')
        # The plan a prepared statement gets once PostgreSQL caches one for any parameters.
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        sql = Statements.for_schema(schema)
        for name, statement, args in (
            ("first_page", sql.list_sessions, "(100)"),
            ("later_page", sql.list_sessions_after, "(100, 's10000')"),
        ):
            await conn.execute(f"PREPARE {name} AS {statement}")
            found = await conn.fetchval(f"EXPLAIN (FORMAT JSON) EXECUTE {name}{args}")
            (plan,) = msgspec.json.decode(found) if isinstance(found, str) else found
            nodes = list(_nodes(plan["Plan"]))
            kinds = {(n["Node Type"], n.get("Index Name")) for n in nodes}
            # The sessions' key walked in order and each listed session's last event probed by
            # its key: nothing sorted, no table scanned whole, no merge over all events.
            assert ("Index Scan", "sessions_pkey") in kinds, kinds
            assert ("Index Scan", "events_pkey") in kinds, kinds
            assert not {k for k, _ in kinds} & {"Seq Scan", "Sort", "Merge Join", "Hash Join"}
            (probe,) = [n for n in nodes if n.get("Index Name") == "events_pkey"]
            assert "session_id = s.id" in probe["Index Cond"], probe
            # A later page starts at ``after`` in the key (an index condition, not a filter
            # over the sessions before it).
            (walk,) = [n for n in nodes if n.get("Index Name") == "sessions_pkey"]
            assert "Filter" not in walk, walk
            if name == "later_page":
                assert "id > " in walk.get("Index Cond", ""), walk
    finally:
        await conn.close()
