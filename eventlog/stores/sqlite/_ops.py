"""The SQL of the SQLite backend: plain functions run on a worker thread, one call per hop.

Each function takes the connection first and does all of one operation's statements, so an
operation costs one thread hop. Write operations run in :func:`~._transaction.transaction`
(``BEGIN IMMEDIATE``, rolled back on any error). Table names are written ``{p}sessions``: the
connection (:class:`~._schema.PrefixedConnection`) puts the store's ``table_prefix`` there.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import msgspec

from ..._codec import Row
from ..._errors import CorruptLogError, SessionBusyError, SessionExistsError
from .._base import SessionInfo, SessionRecord, session_not_found
from ._liveness import HOLDER, holder_alive, holder_of
from ._round_sql import insert_rows
from ._transaction import transaction

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
            insert_rows(connection, record.id, rows)


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
        # An error the sqlite3 module raises itself, not SQLite (it carries no SQLite error
        # code): the one such error of a fetch is a text column whose bytes do not decode.
        if getattr(exc, "sqlite_errorcode", None) is not None:
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
