"""The PostgreSQL store's schema and statements, all qualified with the store's schema name.

Tables follow docs/stores.md: ``meta(format_version)``, ``sessions`` (with the writer lease:
``writer`` and its expiry ``lease_until``, on the server's clock so hosts need not agree on
time) and ``events``. Payloads are stored as ``text`` holding the exact JSON bytes the hash
chain covers, so ``data::jsonb ->> 'turn'`` works for auditors while the bytes round-trip
unchanged (``jsonb`` would reorder keys and renormalise numbers).

A write round is one statement: one round trip, one transaction, the tail check inside it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from ..._codec import FORMAT_VERSION
from ..._errors import StoreNotFoundError, UnsupportedFormatError
from .._base import ATTACHMENT_COLUMNS, SNAPSHOT_COLUMNS, TABLE_COLUMNS

__all__ = ("Statements", "quote_ident", "setup_schema")


def quote_ident(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def _channel(schema: str) -> str:
    # NOTIFY channels are database-wide: name ours after the schema. Identifiers stop at 63
    # bytes, so a long schema name is replaced by its digest.
    name = f"eventlog:{schema}"
    if len(name.encode()) <= 63:
        return name
    return "eventlog:" + hashlib.blake2b(schema.encode(), digest_size=16).hexdigest()


_TABLES = """
CREATE TABLE IF NOT EXISTS {s}.meta (
    format_version integer NOT NULL
);
CREATE TABLE IF NOT EXISTS {s}.sessions (
    id text PRIMARY KEY,
    created_at bigint NOT NULL,
    parent_id text,
    fork_seq bigint,
    metadata json NOT NULL DEFAULT '{{}}',
    head bigint NOT NULL DEFAULT -1,
    writer text,
    lease_until timestamptz
);
CREATE TABLE IF NOT EXISTS {s}.events (
    session_id text NOT NULL,
    seq bigint NOT NULL,
    type text NOT NULL,
    time bigint NOT NULL,
    surface text,
    sources text NOT NULL,
    ignorable boolean NOT NULL,
    data text NOT NULL,
    hash bytea NOT NULL,
    PRIMARY KEY (session_id, seq)
);
"""

# One write round, one statement. A batch is written when its session's lease is still its
# writer's and the stored head is the one it expects: the conditional UPDATE is the tail check
# and the row lock at once (in READ COMMITTED an UPDATE that waited for a concurrent round
# re-checks its condition on the row that round committed, so of two rounds expecting the same
# head exactly one moves it); the rows of the sessions it moved are inserted. The ids of the
# other sessions come back as conflicts. One statement instead of a PL/pgSQL function costs
# the server time per round (benchmarks/POSTGRES.md).
#
# With $15 (the channel) it notifies followers in the same transaction. Only with
# synchronous_commit=off: PostgreSQL serialises the commits of notifying transactions across
# the cluster (a lock held until after the commit's WAL flush), which with synchronous_commit=on
# would serialise the writers of every host (benchmarks/POSTGRES.md); then followers are
# notified after the commit (_listen.Notifier).
_WRITE = """
WITH b AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[])
        AS b(id, owner, expected, last)),
moved AS (
    UPDATE {s}.sessions AS s
       SET head = b.last, lease_until = clock_timestamp() + $5 * interval '1 second'
      FROM b
     WHERE s.id = b.id AND s.writer = b.owner AND s.head = b.expected
 RETURNING s.id),
inserted AS (
    INSERT INTO {s}.events (session_id, seq, type, time, surface, sources, ignorable, data, hash)
    SELECT r.*
      FROM unnest($6::text[], $7::bigint[], $8::text[], $9::bigint[], $10::text[],
                  $11::text[], $12::boolean[], $13::text[], $14::bytea[])
        AS r(session_id, seq, type, time, surface, sources, ignorable, data, hash)
     WHERE r.session_id IN (SELECT id FROM moved))
SELECT ARRAY(SELECT id FROM b EXCEPT SELECT id FROM moved),
       (SELECT count(pg_notify($15, id)) FROM moved WHERE $15::text IS NOT NULL)
"""

# For the sessions a round found in conflict: their stored head and its hash, when the lease
# is still the writer's. A retried round whose commit landed unseen finds its own hash there.
_STORED_HEADS = """
SELECT s.id, s.head, e.hash
  FROM unnest($1::text[], $2::text[]) AS b(id, owner)
  JOIN {s}.sessions AS s ON s.id = b.id AND s.writer = b.owner
  LEFT JOIN {s}.events AS e ON e.session_id = s.id AND e.seq = s.head
"""

_INSERT_ROWS = """
INSERT INTO {s}.events (session_id, seq, type, time, surface, sources, ignorable, data, hash)
SELECT $1, r.*
  FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::boolean[],
              $8::text[], $9::bytea[]) AS r
"""

# One page of ``list``: a range of the sessions' primary key in id order, stopped at the limit
# (keyset paging: a page starts after ``after``, never counting the sessions before it), and
# each listed session's last event probed by its primary key, so a page costs what its sessions
# do, not the store (``python -m benchmarks postgres``). The probe is a scalar subquery, run for
# the page's rows only: as a join, the planner may pick a merge join that walks the events' key
# from its start (30,000 rows read for the page after 10,000 sessions of 3 events). The first
# page is a statement of its own: under a generic plan ``$1 IS NULL OR s.id > $1`` is a filter,
# and every later page would walk the key from its start.
_LIST = """
SELECT s.id, s.created_at, s.head, s.parent_id, s.fork_seq, s.metadata::text,
       (SELECT e.time FROM {s}.events AS e WHERE e.session_id = s.id AND e.seq = s.head)
  FROM {s}.sessions AS s
 {where}"""


@dataclass(frozen=True)
class Statements:
    """Every statement of one store, with the schema name filled in."""

    schema: str
    channel: str
    setup_lock: str
    create_schema: str
    create_tables: str
    read_version: str
    insert_version: str
    write: str
    stored_heads: str
    insert_session: str
    insert_rows: str
    get_session: str
    get_head: str
    read_rows: str
    list_sessions: str
    list_sessions_after: str
    delete_session: str
    delete_events: str
    acquire_lease: str
    lease_holder: str
    lock_lease_holder: str
    take_lease: str
    release_lease: str
    renew_leases: str
    notify: str

    @classmethod
    def for_schema(cls, schema: str) -> Statements:
        s = quote_ident(schema)
        channel = _channel(schema)
        return cls(
            schema=schema,
            channel=channel,
            # Two hosts creating the schema at once would race on the catalog.
            setup_lock=(
                f"SELECT pg_advisory_xact_lock(hashtext({_lit('eventlog setup ' + schema)}))"
            ),
            create_schema=f"CREATE SCHEMA IF NOT EXISTS {s}",
            create_tables=_TABLES.format(s=s),
            read_version=f"SELECT max(format_version) FROM {s}.meta",
            insert_version=f"INSERT INTO {s}.meta (format_version) VALUES ($1)",
            write=_WRITE.format(s=s),
            stored_heads=_STORED_HEADS.format(s=s),
            insert_session=(
                f"INSERT INTO {s}.sessions (id, created_at, parent_id, fork_seq, metadata, head) "
                "VALUES ($1, $2, $3, $4, $5::json, $6) ON CONFLICT (id) DO NOTHING RETURNING id"
            ),
            insert_rows=_INSERT_ROWS.format(s=s),
            get_session=(
                "SELECT id, created_at, parent_id, fork_seq, metadata::text, head "
                f"FROM {s}.sessions WHERE id = $1"
            ),
            get_head=f"SELECT head FROM {s}.sessions WHERE id = $1",
            read_rows=(
                "SELECT seq, type, time, surface, sources, ignorable, data, hash "
                f"FROM {s}.events WHERE session_id = $1 AND seq >= $2 ORDER BY seq LIMIT $3"
            ),
            list_sessions=_LIST.format(s=s, where="") + "ORDER BY s.id LIMIT $1",
            list_sessions_after=_LIST.format(s=s, where="WHERE s.id > $2 ")
            + "ORDER BY s.id LIMIT $1",
            # The session row goes first: its row lock orders a delete against write rounds.
            delete_session=(
                f"WITH d AS (DELETE FROM {s}.sessions WHERE id = $1 RETURNING id) "
                "SELECT pg_notify($2, id) IS NULL FROM d"
            ),
            delete_events=f"DELETE FROM {s}.events WHERE session_id = $1",
            acquire_lease=(
                f"UPDATE {s}.sessions "
                "SET writer = $2, lease_until = clock_timestamp() + $3 * interval '1 second' "
                "WHERE id = $1 AND (writer IS NULL OR writer = $2 "
                "OR lease_until <= clock_timestamp()) RETURNING id"
            ),
            lease_holder=(
                "SELECT writer, extract(epoch FROM lease_until - clock_timestamp())::float8 "
                f"FROM {s}.sessions WHERE id = $1"
            ),
            lock_lease_holder=(
                "SELECT writer, extract(epoch FROM lease_until - clock_timestamp())::float8 "
                f"FROM {s}.sessions WHERE id = $1 FOR UPDATE"
            ),
            # Taking over a lease whose owner is known dead (a process of this host that is
            # gone): only from that very owner, so a lease renewed meanwhile is not taken.
            take_lease=(
                f"UPDATE {s}.sessions "
                "SET writer = $2, lease_until = clock_timestamp() + $4 * interval '1 second' "
                "WHERE id = $1 AND writer = $3 RETURNING id"
            ),
            release_lease=(
                f"UPDATE {s}.sessions SET writer = NULL, lease_until = NULL "
                "WHERE id = $1 AND writer = $2"
            ),
            renew_leases=(
                f"UPDATE {s}.sessions AS s "
                "SET lease_until = clock_timestamp() + $3 * interval '1 second' "
                "FROM unnest($1::text[], $2::text[]) AS l(id, owner) "
                "WHERE s.id = l.id AND s.writer = l.owner RETURNING s.id"
            ),
            notify="SELECT count(pg_notify($1, id)) FROM unnest($2::text[]) AS id",
        )


def _lit(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


#: The columns of each table (the sessions table also holds the lease's expiry).
_COLUMNS = {**TABLE_COLUMNS, "sessions": TABLE_COLUMNS["sessions"] | {"lease_until"}}
#: The tables made later, by the first attachment and the first snapshot (``CREATE TABLE IF
#: NOT EXISTS`` in their transaction): missing at start is fine, another application's is not
#: (every write of the store's would fail on it, or a read return rows of another shape).
_LATER = {"attachments": ATTACHMENT_COLUMNS, "snapshots": SNAPSHOT_COLUMNS}
# Every relation of the schema with one of these names, whatever its kind (a view, an index, a
# sequence or a composite type of that name also stops CREATE TABLE IF NOT EXISTS, silently),
# with whether it is a table and its columns; and every type of these names that is no
# relation's row type (an enum, a domain: CREATE TABLE fails on it, "type ... already exists").
# From the catalog, not information_schema, which hides the tables of roles this one has no
# privilege on: those still stop CREATE TABLE. One round trip.
_RELATIONS = """
SELECT c.relname::text, c.relkind IN ('r', 'p'), array_remove(array_agg(a.attname::text), NULL)
  FROM pg_catalog.pg_class AS c
  JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
  LEFT JOIN pg_catalog.pg_attribute AS a
    ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
 WHERE n.nspname = $1 AND c.relname = ANY($2::text[])
 GROUP BY c.relname, c.relkind
UNION ALL
SELECT t.typname::text, false, ARRAY[]::text[]
  FROM pg_catalog.pg_type AS t
  JOIN pg_catalog.pg_namespace AS n ON n.oid = t.typnamespace
 WHERE n.nspname = $1 AND t.typname = ANY($2::text[]) AND t.typrelid = 0
"""


async def _check_tables(conn: Any, sql: Statements, store: str) -> bool:
    """Whether eventlog's tables exist in the schema (False: none of them does).

    :raises UnsupportedFormatError: a table of eventlog's names (the attachments and snapshots
        tables included, made later) is another application's, or only some exist.
    """
    wanted = {**_COLUMNS, **_LATER}
    found: dict[str, bool] = {}
    for name, is_table, columns in await conn.fetch(_RELATIONS, sql.schema, list(wanted)):
        found[name] = found.get(name, True) and is_table and wanted[name] <= set(columns)
    for name in _LATER:  # made later: missing is fine, foreign is not
        if found.get(name) is True:
            del found[name]
    if not found:
        return False
    if len(found.keys() & _COLUMNS.keys()) < len(_COLUMNS) or not all(found.values()):
        # Name the foreign ones; when none is, the set is half made: name what is there.
        named = sorted(name for name, ours in found.items() if not ours) or sorted(found)
        raise UnsupportedFormatError(
            f"postgresql store {store!r}: schema {sql.schema!r} already holds table(s) "
            f"{', '.join(named)} that are not eventlog's; nothing was created",
            hint="give the store a schema of its own with schema= (or ?schema= in the URL)",
        )
    return True


async def setup_schema(conn: Any, sql: Statements, store: str, *, create: bool = True) -> None:
    """Create the schema on first use (unless not ``create``), or check its format version;
    one host at a time.

    :raises UnsupportedFormatError: the stored format version is newer than this library's,
        or the schema holds another application's tables of eventlog's names (nothing is
        created then).
    :raises StoreNotFoundError: the schema holds no eventlog tables and not ``create``.
    """
    async with conn.transaction():
        await conn.execute(sql.setup_lock)
        if not await _check_tables(conn, sql, store):
            if not create:
                raise StoreNotFoundError(
                    f"postgresql store {store!r}: schema {sql.schema!r} holds no eventlog "
                    "tables; nothing was created",
                    hint="check the database and ?schema= of the URL",
                )
            if not await conn.fetchval(
                "SELECT count(*) > 0 FROM pg_namespace WHERE nspname = $1", sql.schema
            ):
                # Only when missing: CREATE SCHEMA needs a privilege an app may lack.
                await conn.execute(sql.create_schema)
            await conn.execute(sql.create_tables)
        version = await conn.fetchval(sql.read_version)
        if version is None:
            await conn.execute(sql.insert_version, FORMAT_VERSION)
        elif version > FORMAT_VERSION:
            raise UnsupportedFormatError(
                f"postgresql store {store!r} (schema {sql.schema!r}) has format version "
                f"{version}; this version of eventlog reads up to version {FORMAT_VERSION}",
                hint="upgrade eventlog to open this store",
            )
