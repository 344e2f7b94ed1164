"""How the SQLite backend writes a round: the statements of its two routes (``_rounds``).

On the writer thread a round is ONE statement. The envelope columns (and each row's session)
travel as one JSON array, payloads and hashes as two concatenated blobs sliced by offset. Each
statement is a round trip for the GIL (released while SQLite works, taken back after), and the
writer thread waits long for the GIL while the event loop is busy: with ``executemany`` it
waited after every row (a 10,800-row round took seconds, not 70 ms). So there a round is an
insert into a temporary view whose trigger moves every session's head and inserts every row,
run in autocommit (:func:`~._transaction.one_statement`): the write lock, the writes and the
commit's fsync are one call, the GIL is handed back once.

On the event loop's thread nothing competes for the GIL, and one ``UPDATE`` and one
``executemany`` per session in ``BEGIN IMMEDIATE`` cost less than the packed statement's JSON
for a round of one or two sessions; from three sessions on, the per-statement cost of the
sessions outweighs it and the packed statement is used there too (``_PACKED_FROM``, measured:
one session of 18 rows 129 against 161 µs, 256 sessions of one row 10.7 against 6.3 ms, on a
file in /dev/shm so the figures show the statements, not the fsync). A round on the thread
whose packed statement found a head moved (rare) is written again session by session, the
same way, to learn which sessions to fence.

JSON has one number type: in the packed statement an integer column gets its value only when
it is a JSON integer (in SQLite's 64-bit range), otherwise NULL, which the NOT NULL column
refuses: the round fails instead of storing a REAL. (The writer never hands a backend such a
row; this keeps the file exact if one came.)
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

from ..._codec import Row
from .._batch import Batch
from ._transaction import one_statement, transaction

__all__ = ("Packed", "insert_rows", "pack", "prepare_round", "write_round", "write_round_here")

_INSERT = (
    "INSERT INTO {p}events (session_id, seq, type, time, surface, sources, ignorable, data, hash) "
    "SELECT json_extract(j.value, '$[10]'), "
    "iif(typeof(json_extract(j.value, '$[0]')) = 'integer', json_extract(j.value, '$[0]'), NULL), "
    "json_extract(j.value, '$[1]'), "
    "iif(typeof(json_extract(j.value, '$[2]')) = 'integer', json_extract(j.value, '$[2]'), NULL), "
    "json_extract(j.value, '$[3]'), json_extract(j.value, '$[4]'), "
    "json_extract(j.value, '$[5]'), "
    "CAST(substr({datas}, json_extract(j.value, '$[6]'), json_extract(j.value, '$[7]')) AS TEXT), "
    "substr({hashes}, json_extract(j.value, '$[8]'), json_extract(j.value, '$[9]')) "
    "FROM json_each({envelopes}) AS j"
)
# The round's view and trigger, in the writer connection's own TEMP schema, made once when the
# connection is prepared (:func:`prepare_round`). The trigger moves the heads that still equal
# the expected ones and whose lease is still the writer's (``[session, new head, expected
# head, owner]`` per session: a stale writer never writes into a session deleted and created
# again meanwhile, whose head may well be the one it expects), aborts the whole statement
# (nothing written) unless every session's head moved, then inserts the rows. Its abort is
# the only ``RAISE`` of the schema, so SQLite's code for it, ``SQLITE_CONSTRAINT_TRIGGER``,
# says "a head or lease moved" without reading the message.
_ROUND_VIEW = (
    "CREATE TEMP VIEW IF NOT EXISTS eventlog_round (heads, envelopes, datas, hashes) "
    "AS SELECT NULL, NULL, NULL, NULL"
)
_ROUND_TRIGGER = (
    "CREATE TEMP TRIGGER IF NOT EXISTS eventlog_round_write "
    "INSTEAD OF INSERT ON eventlog_round BEGIN "
    "UPDATE {p}sessions SET head = j.value ->> 1 FROM json_each(NEW.heads) AS j "
    "WHERE {p}sessions.id = j.value ->> 0 AND {p}sessions.head = j.value ->> 2 "
    "AND {p}sessions.writer = j.value ->> 3; "
    "SELECT RAISE(ABORT, 'eventlog: a head or lease moved') "
    "WHERE changes() != json_array_length(NEW.heads); "
    + _INSERT.format(p="{p}", datas="NEW.datas", hashes="NEW.hashes", envelopes="NEW.envelopes")
    + "; END"
)
_ROUND = "INSERT INTO temp.eventlog_round (heads, envelopes, datas, hashes) VALUES (?, ?, ?, ?)"
_INSERT_PACKED = _INSERT.format(p="{p}", datas="?2", hashes="?3", envelopes="?1")
_MOVE_HEAD = "UPDATE {p}sessions SET head = ? WHERE id = ? AND head = ? AND writer = ?"
_INSERT_ROW = (
    "INSERT INTO {p}events (session_id, seq, type, time, surface, sources, ignorable, data, hash) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, CAST(? AS TEXT), ?)"
)
_encoder = msgspec.json.Encoder()
#: Sessions in a round from which the packed statement beats one statement per session on the
#: event loop's thread (see the module's docstring).
_PACKED_FROM = 3


def prepare_round(connection: sqlite3.Connection) -> None:
    """Make the writer connection's TEMP view and trigger of :func:`write_round` (they are the
    connection's own, gone with it); after the tables exist."""
    connection.execute(_ROUND_VIEW)
    connection.execute(_ROUND_TRIGGER)


def _packed(batches: Iterable[tuple[str, Sequence[Row]]]) -> tuple[str, bytes, bytes]:
    """The envelopes, payloads and hashes of :data:`_INSERT` for each ``(session_id, rows)``
    (the JSON bound as TEXT: SQLite 3.45+ would read a BLOB as its binary JSONB format)."""
    envelopes: list[tuple[Any, ...]] = []
    datas: list[bytes] = []
    hashes: list[bytes] = []
    push, push_data, push_hash = envelopes.append, datas.append, hashes.append
    data_at = hash_at = 1  # substr() counts from 1
    for session_id, rows in batches:
        for r in rows:
            data, digest = r.data, r.hash
            size, hash_size = len(data), len(digest)
            push(
                (
                    r.seq,
                    r.type,
                    r.time,
                    r.surface,
                    r.sources,
                    r.ignorable,
                    data_at,
                    size,
                    hash_at,
                    hash_size,
                    session_id,
                )
            )
            data_at += size
            hash_at += hash_size
            push_data(data)
            push_hash(digest)
    return _encoder.encode(envelopes).decode(), b"".join(datas), b"".join(hashes)


#: The parameters of a round's statement: the heads' JSON, then the envelopes, payloads and
#: hashes (see :data:`_ROUND_TRIGGER`).
Packed = tuple[str, tuple[str, bytes, bytes]]


def pack(batches: Sequence[Batch], owners: Mapping[str, str]) -> Packed:
    """The parameters of a round's statement (built on the event loop's thread before a round
    goes to the writer thread: Python work there waits for the GIL)."""
    heads = [
        (b.session_id, b.rows[-1].seq, b.expected_head, owners.get(b.session_id, ""))
        for b in batches
    ]
    return _encoder.encode(heads).decode(), _packed((b.session_id, b.rows) for b in batches)


def write_round_here(
    connection: sqlite3.Connection, batches: Sequence[Batch], owners: Mapping[str, str]
) -> list[str]:
    """:func:`write_round` for the event loop's thread: never waits for the write lock; a
    round of fewer than ``_PACKED_FROM`` sessions is one ``executemany`` per session.

    :raises WriteLockBusy: another connection holds the write lock (nothing was written).
    """
    if len(batches) >= _PACKED_FROM:
        return write_round(connection, batches, owners, pack(batches, owners), 0)
    with transaction(connection, wait_ms=0):
        return _write_each(connection, batches, owners)


def write_round(
    connection: sqlite3.Connection,
    batches: Sequence[Batch],
    owners: Mapping[str, str],
    packed: Packed,
    wait_ms: int,
) -> list[str]:
    """Write every batch whose expected head matches the stored one and whose session's lease
    is still ``owners[session]``, in one transaction (the packed statement, with ``packed``
    from :func:`pack`), and return the other sessions (another writer moved the head or took
    the lease, or the session is gone; nothing of theirs is written). Waits up to ``wait_ms``
    for another connection's write lock once it is found taken (``0``: not at all).

    :raises WriteLockBusy: ``wait_ms=0`` and the lock is taken (nothing was written).
    """
    heads, (envelopes, datas, hashes) = packed
    try:
        one_statement(connection, _ROUND, (heads, envelopes, datas, hashes), wait_ms=wait_ms)
    except sqlite3.IntegrityError as exc:
        if exc.sqlite_errorcode != sqlite3.SQLITE_CONSTRAINT_TRIGGER:
            raise
    else:
        return []
    # A head moved under its session, or a session is gone (rare: those sessions are fenced):
    # the round is written again session by session, to learn which.
    with transaction(connection, wait_ms=wait_ms):
        return _write_each(connection, batches, owners)


def _write_each(
    connection: sqlite3.Connection, batches: Sequence[Batch], owners: Mapping[str, str]
) -> list[str]:
    """The round, session by session, inside the caller's transaction: the sessions whose
    head or lease check failed (nothing of theirs written)."""
    conflicts = []
    for session_id, expected_head, rows in batches:
        # The tail check, the lease check and the head move are one statement: it matches no
        # row when another writer moved the head or holds the lease (or the session is gone).
        owner = owners.get(session_id, "")
        moved = connection.execute(_MOVE_HEAD, (rows[-1].seq, session_id, expected_head, owner))
        if moved.rowcount != 1:
            conflicts.append(session_id)
            continue
        _insert_each(connection, session_id, rows)
    return conflicts


def _insert_each(connection: sqlite3.Connection, session_id: str, rows: Sequence[Row]) -> None:
    connection.executemany(
        _INSERT_ROW,
        [
            (session_id, r.seq, r.type, r.time, r.surface, r.sources, r.ignorable, r.data, r.hash)
            for r in rows
        ],
    )


def insert_rows(connection: sqlite3.Connection, session_id: str, rows: Sequence[Row]) -> None:
    """Insert one session's rows, inside the caller's transaction, in one statement (on the
    writer thread: a fork's or an import's rows give the GIL back once)."""
    connection.execute(_INSERT_PACKED, _packed([(session_id, rows)]))
