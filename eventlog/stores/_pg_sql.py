"""The PostgreSQL store's schema and statements, all qualified with the store's schema name.

Tables follow DESIGN §5: ``meta(format_version)``, ``sessions`` (with the writer lease:
``writer`` and its expiry ``lease_until``, on the server's clock so hosts need not agree on
time) and ``events``. Payloads are stored as ``text`` holding the exact JSON bytes the hash
chain covers, so ``data::jsonb ->> 'turn'`` works for auditors while the bytes round-trip
unchanged (``jsonb`` would reorder keys and renormalise numbers).

A write round is one call of ``eventlog_write``: one round trip, one transaction, the tail
check inside it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from ..codec import FORMAT_VERSION
from ..errors import UnsupportedFormatError

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

# One write round. A batch is written when its session's lease is still its writer's and the
# stored head is the one it expects: the conditional UPDATE is the tail check and the row lock
# at once (in READ COMMITTED an UPDATE that waited for a concurrent round re-checks its
# condition on the row that round committed, so exactly one of two rounds expecting the same
# head moves it). Rarely, a round whose commit landed but whose reply was lost is retried: the
# stored head then falls inside the batch with our hash at that seq, and only the rows after
# it are inserted. Every other batch is a conflict and is returned. (Sessions come sorted by
# id, so concurrent rounds lock rows in the same order.)
#
# It notifies followers only when given a channel: PostgreSQL serialises the commits of
# notifying transactions across the whole cluster (a lock held until after the commit's WAL
# flush), which with synchronous_commit=on would serialise the writers of every host (measured:
# 4 writers, 9.4k instead of 14.9k events/s). So with synchronous_commit=on followers are
# notified right after the commit (_pg_listen.Notifier); with it off the commit does not wait
# for a flush, the lock is brief, and notifying inside saves a transaction per round.
_WRITE_FUNCTION = """
CREATE OR REPLACE FUNCTION {s}.eventlog_write(
    p_ids text[], p_owners text[], p_expected bigint[], p_last bigint[],
    p_ttl double precision,
    r_sid text[], r_seq bigint[], r_type text[], r_time bigint[], r_surface text[],
    r_sources text[], r_ignorable boolean[], r_data text[], r_hash bytea[],
    p_channel text
) RETURNS text[] LANGUAGE plpgsql AS $body$
DECLARE
    v_ok text[];
    v_from bigint[];
    v_retried text[];
    v_retried_from bigint[];
BEGIN
    WITH moved AS (
        UPDATE {s}.sessions AS s
           SET head = b.last,
               lease_until = clock_timestamp() + p_ttl * interval '1 second'
          FROM unnest(p_ids, p_owners, p_expected, p_last) AS b(id, owner, expected, last)
         WHERE s.id = b.id AND s.writer = b.owner AND s.head = b.expected
     RETURNING s.id, b.expected)
    SELECT coalesce(array_agg(id), '{{}}'), coalesce(array_agg(expected), '{{}}')
      INTO v_ok, v_from FROM moved;
    IF cardinality(v_ok) < cardinality(p_ids) THEN
        WITH recognised AS (
            SELECT s.id, s.head
              FROM {s}.sessions AS s
              JOIN unnest(p_ids, p_owners, p_expected, p_last) AS b(id, owner, expected, last)
                ON s.id = b.id AND s.writer = b.owner
             WHERE s.id <> ALL (v_ok) AND s.head > b.expected AND s.head <= b.last
               AND EXISTS (
                   SELECT 1
                     FROM unnest(r_sid, r_seq, r_hash) AS r(sid, seq, hash)
                     JOIN {s}.events AS e ON e.session_id = r.sid AND e.seq = r.seq
                    WHERE r.sid = s.id AND r.seq = s.head AND e.hash = r.hash)
               FOR UPDATE OF s)
        SELECT coalesce(array_agg(id), '{{}}'), coalesce(array_agg(head), '{{}}')
          INTO v_retried, v_retried_from FROM recognised;
        UPDATE {s}.sessions AS s
           SET head = b.last,
               lease_until = clock_timestamp() + p_ttl * interval '1 second'
          FROM unnest(p_ids, p_last) AS b(id, last)
         WHERE s.id = b.id AND s.id = ANY (v_retried);
        v_ok := v_ok || v_retried;
        v_from := v_from || v_retried_from;
    END IF;
    INSERT INTO {s}.events
         (session_id, seq, type, time, surface, sources, ignorable, data, hash)
    SELECT r.*
      FROM unnest(r_sid, r_seq, r_type, r_time, r_surface, r_sources, r_ignorable, r_data,
                  r_hash) AS r(session_id, seq, type, time, surface, sources, ignorable,
                               data, hash)
      JOIN unnest(v_ok, v_from) AS ok(id, from_seq) ON ok.id = r.session_id
     WHERE r.seq > ok.from_seq;
    IF p_channel IS NOT NULL THEN
        PERFORM pg_notify(p_channel, ok.id) FROM unnest(v_ok) AS ok(id);
    END IF;
    RETURN ARRAY(SELECT unnest(p_ids) EXCEPT SELECT unnest(v_ok));
END
$body$;
"""

_INSERT_ROWS = """
INSERT INTO {s}.events (session_id, seq, type, time, surface, sources, ignorable, data, hash)
SELECT $1, r.*
  FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::boolean[],
              $8::text[], $9::bytea[]) AS r
"""


@dataclass(frozen=True)
class Statements:
    """Every statement of one store, with the schema name filled in."""

    schema: str
    channel: str
    setup_lock: str
    has_meta: str
    create_schema: str
    create_tables: str
    create_write_function: str
    read_version: str
    insert_version: str
    write: str
    insert_session: str
    insert_rows: str
    get_session: str
    get_head: str
    read_rows: str
    list_sessions: str
    delete_session: str
    delete_events: str
    acquire_lease: str
    lease_holder: str
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
            has_meta=f"SELECT to_regclass({_lit(s + '.meta')}) IS NOT NULL",
            create_schema=f"CREATE SCHEMA IF NOT EXISTS {s}",
            create_tables=_TABLES.format(s=s),
            create_write_function=_WRITE_FUNCTION.format(s=s),
            read_version=f"SELECT max(format_version) FROM {s}.meta",
            insert_version=f"INSERT INTO {s}.meta (format_version) VALUES ($1)",
            write=f"SELECT {s}.eventlog_write({', '.join(f'${i}' for i in range(1, 16))})",
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
            list_sessions=(
                "SELECT s.id, s.created_at, s.head, s.parent_id, s.fork_seq, s.metadata::text, "
                f"(SELECT e.time FROM {s}.events AS e WHERE e.session_id = s.id "
                "AND e.seq = s.head) "
                f"FROM {s}.sessions AS s WHERE $1::text IS NULL OR s.id > $1 "
                "ORDER BY s.id LIMIT $2"
            ),
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


async def setup_schema(conn: Any, sql: Statements, store: str) -> None:
    """Create the schema on first use, or check its format version; one host at a time.

    :raises UnsupportedFormatError: the stored format version is newer than this library's.
    """
    async with conn.transaction():
        await conn.execute(sql.setup_lock)
        if not await conn.fetchval(sql.has_meta):
            if not await conn.fetchval(
                "SELECT count(*) > 0 FROM pg_namespace WHERE nspname = $1", sql.schema
            ):
                # Only when missing: CREATE SCHEMA needs a privilege an app may lack.
                await conn.execute(sql.create_schema)
            await conn.execute(sql.create_tables)
            await conn.execute(sql.create_write_function)
        version = await conn.fetchval(sql.read_version)
        if version is None:
            await conn.execute(sql.insert_version, FORMAT_VERSION)
        elif version > FORMAT_VERSION:
            raise UnsupportedFormatError(
                f"postgresql store {store!r} (schema {sql.schema!r}) has format version "
                f"{version}; this version of eventlog reads up to version {FORMAT_VERSION}",
                hint="upgrade eventlog to open this store",
            )
