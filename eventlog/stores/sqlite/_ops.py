"""The SQL of the SQLite backend: plain functions run on a worker thread, one call per hop.

Each function takes the connection first and does all of one operation's statements, so an
operation costs one thread hop. Write operations run in :func:`~._transaction.transaction`
(``BEGIN IMMEDIATE``, rolled back on any error). Table names are written ``{p}sessions``: the
connection (:class:`~._schema.PrefixedConnection`) puts the store's ``table_prefix`` there.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import msgspec

from ..._codec import Row
from ..._errors import CorruptLogError, SessionBusyError, SessionExistsError
from .._base import SessionInfo, SessionRecord, session_not_found
from .._writer import Batch
from ._liveness import HOLDER, holder_alive, holder_of
from ._transaction import WriteLockBusy, one_statement, transaction, waiting_for_lock

__all__ = (
    "acquire_lease",
    "insert_session",
    "poll_head",
    "release_lease",
    "select_infos",
    "select_rows",
    "select_session",
    "stored_holder",
    "UndecodableRow",
    "Packed",
    "WriteLockBusy",
    "pack",
    "write_batches",
    "waiting_for_lock",
    "write_batches_now",
)

# The rows of a whole round are one statement: the envelope columns (and each row's session)
# travel as one JSON array, payloads and hashes as two concatenated blobs sliced by offset. Each
# statement is a round trip for the GIL (released while SQLite works, taken back after), and
# the writer thread waits long for the GIL while the event loop is busy: with `executemany` it
# waited after every row (a 10,800-row round took seconds, not 70 ms). So a packed round is ONE
# statement, an insert into a temporary view whose trigger moves every session's head and
# inserts every row, run in autocommit (`_transaction.one_statement`): the write lock, the
# writes and the commit's fsync are one call, the GIL is handed back once. JSON has one number
# type: an integer column gets its value only when it is a JSON integer (in SQLite's 64-bit
# range), otherwise NULL, which the NOT NULL column refuses: the round fails instead of storing
# a REAL. (The writer never hands a backend such a row; this keeps the file exact if one came.)
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
#: The message of the packed round's abort when a head or lease did not match.
_HEAD_MOVED = "eventlog: a head or lease moved"
# The packed round's view and trigger, in the writer connection's own TEMP schema (made once
# per connection). The trigger moves the heads that still equal the expected ones and whose
# lease is still the writer's (``[session, new head, expected head, owner]`` per session: a stale
# writer never writes into a session deleted and created again meanwhile, whose head may well
# be the one it expects), aborts the whole statement (nothing written) unless every session's
# head moved, then inserts the rows.
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
    f"SELECT RAISE(ABORT, '{_HEAD_MOVED}') WHERE changes() != json_array_length(NEW.heads); "
    + _INSERT.format(p="{p}", datas="NEW.datas", hashes="NEW.hashes", envelopes="NEW.envelopes")
    + "; END"
)
_ROUND = "INSERT INTO temp.eventlog_round (heads, envelopes, datas, hashes) VALUES (?, ?, ?, ?)"
_INSERT_PACKED = _INSERT.format(p="{p}", datas="?2", hashes="?3", envelopes="?1")
_INSERT_ROW = (
    "INSERT INTO {p}events (session_id, seq, type, time, surface, sources, ignorable, data, hash) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, CAST(? AS TEXT), ?)"
)
_SELECT_ROWS = (
    "SELECT seq, type, time, surface, sources, ignorable, CAST(data AS BLOB), hash FROM {p}events "
    "WHERE session_id = ? AND seq >= ? ORDER BY seq LIMIT ?"
)
# The same rows with every text column as its stored bytes: read when the text of a row is not
# valid UTF-8 (sqlite3 then fails the whole fetch), to find that row and load the ones before.
_SELECT_RAW_ROWS = (
    "SELECT seq, CAST(type AS BLOB), time, CAST(surface AS BLOB), CAST(sources AS BLOB), "
    "ignorable, CAST(data AS BLOB), hash FROM {p}events "
    "WHERE session_id = ? AND seq >= ? ORDER BY seq LIMIT ?"
)
_metadata_decoder = msgspec.json.Decoder(dict[str, Any])
_encoder = msgspec.json.Encoder()


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


#: The parameters of the packed round: the heads' JSON, then the envelopes, payloads and
#: hashes (see :data:`_ROUND_TRIGGER`).
Packed = tuple[str, tuple[str, bytes, bytes]]


def pack(batches: Sequence[Batch], owners: Mapping[str, str]) -> Packed:
    """The parameters of a round's packed statements (built on the event loop's thread before
    the round goes to the writer thread: Python work there waits for the GIL)."""
    heads = [
        (b.session_id, b.rows[-1].seq, b.expected_head, owners.get(b.session_id, ""))
        for b in batches
    ]
    return _encoder.encode(heads).decode(), _packed((b.session_id, b.rows) for b in batches)


def write_batches(
    connection: sqlite3.Connection,
    batches: Sequence[Batch],
    owners: Mapping[str, str],
    busy_timeout_ms: int,
    packed: Packed | None = None,
) -> list[str]:
    """Write every batch whose expected head matches the stored one and whose session's lease
    is still ``owners[session]``, in one transaction, and return the other sessions (another
    writer moved the head or took the lease, or the session is gone; nothing of theirs is
    written).

    For the writer thread: waits up to ``busy_timeout_ms`` for another process's write lock,
    and writes the round in one statement (see :data:`_ROUND_TRIGGER`), with ``packed`` (see
    :func:`pack`) when given.
    """
    if _write_packed(connection, batches, packed or pack(batches, owners), busy_timeout_ms):
        return []
    # A head moved under its session, or a session is gone (rare: those sessions are fenced):
    # the round is written again session by session, to learn which.
    with transaction(connection, wait_ms=busy_timeout_ms):
        return _write_each(connection, batches, owners, _insert_packed)


#: Sessions in a round from which the packed statements beat one statement per session on the
#: event loop's thread (there, each statement costs no GIL hand-off; the packed JSON costs
#: more than ``executemany`` for a session or two).
_PACKED_FROM = 3


def write_batches_now(
    connection: sqlite3.Connection, batches: Sequence[Batch], owners: Mapping[str, str]
) -> list[str]:
    """:func:`write_batches` for the event loop's thread: never waits for the write lock (the
    writer connection's own busy timeout is zero; see :func:`waiting_for_lock`).

    :raises WriteLockBusy: another connection holds the write lock (nothing was written).
    """
    if len(batches) >= _PACKED_FROM and _write_packed(
        connection, batches, pack(batches, owners), 0
    ):
        return []
    # On this thread nothing competes for the GIL, so ``executemany`` (one GIL round trip per
    # row) is the cheapest insert of a small round.
    with transaction(connection, wait_ms=0):
        return _write_each(connection, batches, owners, _insert_each)


def _write_packed(
    connection: sqlite3.Connection, batches: Sequence[Batch], packed: Packed, wait_ms: int
) -> bool:
    """The round in one statement (see :data:`_ROUND_TRIGGER`), its own transaction. ``True``:
    committed; ``False``: some head or lease did not match, nothing was written.

    :raises WriteLockBusy: ``wait_ms=0`` and another connection holds the write lock.
    """
    heads, (envelopes, datas, hashes) = packed
    parameters = (heads, envelopes, datas, hashes)
    try:
        try:
            one_statement(connection, _ROUND, parameters, wait_ms=wait_ms)
        except sqlite3.OperationalError as exc:
            if "no such table: temp.eventlog_round" not in str(exc):
                raise
            # The connection's first packed round: its TEMP view and trigger (they are the
            # connection's own, gone with it), then the round.
            connection.execute(_ROUND_VIEW)
            connection.execute(_ROUND_TRIGGER)
            one_statement(connection, _ROUND, parameters, wait_ms=wait_ms)
    except sqlite3.IntegrityError as exc:
        if str(exc) == _HEAD_MOVED:
            return False
        raise
    return True


def _insert_packed(connection: sqlite3.Connection, session_id: str, rows: Sequence[Row]) -> None:
    connection.execute(_INSERT_PACKED, _packed([(session_id, rows)]))


def _insert_each(connection: sqlite3.Connection, session_id: str, rows: Sequence[Row]) -> None:
    connection.executemany(
        _INSERT_ROW,
        [
            (session_id, r.seq, r.type, r.time, r.surface, r.sources, r.ignorable, r.data, r.hash)
            for r in rows
        ],
    )


def _write_each(
    connection: sqlite3.Connection,
    batches: Sequence[Batch],
    owners: Mapping[str, str],
    insert: Callable[[sqlite3.Connection, str, Sequence[Row]], None],
) -> list[str]:
    """The body of a write round, session by session, inside the caller's transaction: the
    sessions whose head or lease check failed (nothing of theirs written)."""
    conflicts = []
    for session_id, expected_head, rows in batches:
        # The tail check, the lease check and the head move are one statement: it matches no
        # row when another writer moved the head or holds the lease (or the session is gone).
        moved = connection.execute(
            "UPDATE {p}sessions SET head = ? WHERE id = ? AND head = ? AND writer = ?",
            (rows[-1].seq, session_id, expected_head, owners.get(session_id, "")),
        )
        if moved.rowcount != 1:
            conflicts.append(session_id)
            continue
        insert(connection, session_id, rows)
    return conflicts


def insert_session(
    connection: sqlite3.Connection, record: SessionRecord, rows: Sequence[Row]
) -> None:
    """Insert a session and its initial rows atomically."""
    with transaction(connection):
        try:
            connection.execute(
                "INSERT INTO {p}sessions (id, created_at, parent_id, fork_seq, metadata, head) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    record.id,
                    record.created_at,
                    record.parent_id,
                    record.fork_seq,
                    msgspec.json.encode(record.metadata).decode(),
                    rows[-1].seq if rows else -1,
                ),
            )
        except sqlite3.IntegrityError as exc:
            raise SessionExistsError(
                f"session {record.id!r} already exists", session_id=record.id
            ) from exc
        if rows:
            _insert_packed(connection, record.id, rows)


def select_session(connection: sqlite3.Connection, session_id: str) -> SessionRecord:
    # Text columns are read as bytes and decoded here: a damaged byte is a CorruptLogError
    # about this session, not a driver error.
    found = connection.execute(
        "SELECT created_at, CAST(parent_id AS BLOB), fork_seq, CAST(metadata AS BLOB), head "
        "FROM {p}sessions WHERE id = ?",
        (session_id,),
    ).fetchone()
    if found is None:
        raise session_not_found(session_id)
    created_at, parent_id, fork_seq, metadata, head = found
    try:
        return msgspec.convert(
            {
                "id": session_id,
                "created_at": created_at,
                "parent_id": None if parent_id is None else parent_id.decode(),
                "fork_seq": fork_seq,
                "metadata": _metadata_decoder.decode(metadata),
                "head": head,
            },
            SessionRecord,
        )
    except (msgspec.DecodeError, msgspec.ValidationError, TypeError, UnicodeDecodeError) as exc:
        raise CorruptLogError(
            f"session {session_id!r}: its record in the sessions table is damaged: {exc}",
            session_id=session_id,
            hint="the row was altered outside eventlog",
        ) from exc


class UndecodableRow(Exception):
    """A stored row's text is not valid UTF-8: ``rows`` are the good rows before it,
    ``error`` the :class:`CorruptLogError` naming its seq (the backend yields the one, then
    raises the other)."""

    def __init__(self, rows: list[Row], error: CorruptLogError) -> None:
        super().__init__(error.message)
        self.rows = rows
        self.error = error


def select_rows(
    connection: sqlite3.Connection, session_id: str, from_seq: int, count: int
) -> list[Row]:
    """Up to ``count`` rows from ``from_seq``; an empty answer checks that the session exists.

    :raises UndecodableRow: a row's text column is not valid UTF-8.
    """
    try:
        found = connection.execute(_SELECT_ROWS, (session_id, from_seq, count)).fetchall()
    except sqlite3.OperationalError as exc:
        if "decode" not in str(exc):
            raise
        raise _undecodable(connection, session_id, from_seq, count) from exc
    if not found:
        exists = connection.execute("SELECT 1 FROM {p}sessions WHERE id = ?", (session_id,))
        if exists.fetchone() is None:
            raise session_not_found(session_id)
    return [Row(s, t, tm, sf, src, ig == 1, d, h) for s, t, tm, sf, src, ig, d, h in found]


def _undecodable(
    connection: sqlite3.Connection, session_id: str, from_seq: int, count: int
) -> UndecodableRow:
    """The rows before the first one whose text does not decode, and its error."""
    rows: list[Row] = []
    for seq, type_, time_, surface, sources, ig, data, digest in connection.execute(
        _SELECT_RAW_ROWS, (session_id, from_seq, count)
    ):
        try:
            text = [None if v is None else bytes(v).decode() for v in (type_, surface, sources)]
        except UnicodeDecodeError as exc:
            error = CorruptLogError(
                f"session {session_id!r}, seq {seq}: a text column of the stored event is not "
                f"valid UTF-8: {exc}",
                session_id=session_id,
                seq=seq,
                hint="the row was altered outside eventlog; open with salvage=True to read "
                "the events before it",
            )
            return UndecodableRow(rows, error)
        rows.append(Row(seq, text[0], time_, text[1], text[2], ig == 1, data, digest))  # type: ignore[arg-type]
    # The text decodes now: the row changed meanwhile; report it at the first seq asked for.
    error = CorruptLogError(
        f"session {session_id!r}, seq {from_seq}: stored text did not decode as UTF-8",
        session_id=session_id,
        seq=from_seq,
    )
    return UndecodableRow([], error)


def poll_head(
    connection: sqlite3.Connection, session_id: str, head: int, version: int | None
) -> tuple[int, int | None]:
    """``PRAGMA data_version`` and the stored head (``None`` once the session is gone).

    The head is only read when the version differs from ``version`` (some connection
    committed since); otherwise ``head`` is answered back unchanged.
    """
    now = connection.execute("PRAGMA data_version").fetchone()[0]
    if now == version:
        return now, head
    found = connection.execute(
        "SELECT head FROM {p}sessions WHERE id = ?", (session_id,)
    ).fetchone()
    return now, (None if found is None else found[0])


def stored_holder(connection: sqlite3.Connection, session_id: str) -> str | None:
    """The holder of ``session_id``'s lease (``None``: free).

    :raises SessionNotFoundError: no such session.
    """
    found = connection.execute(HOLDER, (session_id,)).fetchone()
    if found is None:
        raise session_not_found(session_id)
    return holder_of(found[0])


def acquire_lease(connection: sqlite3.Connection, session_id: str, owner: str) -> None:
    with transaction(connection):
        holder = stored_holder(connection, session_id)
        if holder is not None and holder != owner and holder_alive(connection, holder, session_id):
            raise SessionBusyError(
                f"session {session_id!r} is open for writing by {holder}",
                session_id=session_id,
                hint="close the other writer, or wait for its process to end",
            )
        connection.execute("UPDATE {p}sessions SET writer = ? WHERE id = ?", (owner, session_id))


def release_lease(connection: sqlite3.Connection, session_id: str, owner: str) -> None:
    connection.execute(
        "UPDATE {p}sessions SET writer = NULL WHERE id = ? AND writer = ?", (session_id, owner)
    )


# One page of ``list``: a range of the sessions' primary-key index in id order, stopped at the
# limit (keyset paging: the page after ``after`` starts there, never counting the ones before),
# and each listed session's last event found by its primary key. Its cost is the page's, not
# the store's (the first page of 10,000 sessions costs what the first of 100 does:
# ``python -m benchmarks sqlite``). The first page has no ``WHERE``: ``?1 IS NULL OR id > ?1``
# would make SQLite walk the index from its start for every later page.
_INFOS = (
    "SELECT CAST(s.id AS BLOB), s.created_at, s.head, CAST(s.parent_id AS BLOB), "
    "s.fork_seq, CAST(s.metadata AS BLOB), e.time "
    "FROM {p}sessions s LEFT JOIN {p}events e ON e.session_id = s.id AND e.seq = s.head "
)
_FIRST_INFOS = _INFOS + "ORDER BY s.id LIMIT ?1"
_INFOS_AFTER = _INFOS + "WHERE s.id > ?2 ORDER BY s.id LIMIT ?1"


def select_infos(
    connection: sqlite3.Connection, after: str | None, limit: int
) -> list[SessionInfo]:
    """Up to ``limit`` sessions with ids greater than ``after`` (all when ``None``), by id."""
    if after is None:
        found = connection.execute(_FIRST_INFOS, (limit,)).fetchall()
    else:
        found = connection.execute(_INFOS_AFTER, (limit, after)).fetchall()
    return [_info(row) for row in found]


def _info(row: tuple[Any, ...]) -> SessionInfo:
    raw_id, created_at, head, parent_id, fork_seq, metadata, last_time = row
    # Text is read as bytes so one damaged record is listed with its error, not fatal to all.
    raw_id = bytes(raw_id or b"")
    session_id = raw_id.decode(errors="backslashreplace")
    try:
        return msgspec.convert(
            {
                "id": raw_id.decode(),
                "created_at": created_at,
                "head": head,
                "parent_id": None if parent_id is None else bytes(parent_id).decode(),
                "fork_seq": fork_seq,
                "metadata": _metadata_decoder.decode(metadata),
                "last_time": last_time,
            },
            SessionInfo,
        )
    except (msgspec.DecodeError, msgspec.ValidationError, TypeError, UnicodeDecodeError) as exc:
        return SessionInfo(id=session_id, error=f"the session's record is damaged: {exc}")
