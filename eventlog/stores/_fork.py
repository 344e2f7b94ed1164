"""Forking a session: a new session whose log is a verified prefix of another's, re-chained
to its own id, and a ``session/forked`` event saying where it came from."""

from __future__ import annotations

import time
from collections.abc import Sequence

import msgspec

from .._codec import GENESIS_HASH, Row, encode_payload, make_row, rechain, verify_rows
from .._errors import ValidationError
from .._ids import new_session_id, validate_session_id
from .._registry import EventTypes
from .._strict import INT64_MAX, INT64_MIN, check_int
from .._vocabulary import SessionForked
from ._base import Backend, SessionRecord

__all__ = ("fork_log",)


async def fork_log(
    backend: Backend, types: EventTypes, session_id: str, boundary: int, child_id: str | None
) -> str:
    """Store the fork of ``session_id`` at ``boundary`` (see :meth:`~eventlog.Store.fork`)
    and return the child's id.

    :raises ValidationError: an id is malformed, or the boundary is outside the stored log
        or inside a turn still open there.
    """
    sid = validate_session_id(session_id)
    wanted = None if child_id is None else validate_session_id(child_id)
    if not check_int(boundary, INT64_MIN, INT64_MAX - 1):
        raise ValidationError(
            f"session {sid!r}: fork boundary must be an int (a seq), got {boundary!r}",
            session_id=sid,
        )
    record = await backend.get_session(sid)
    rows: list[Row] = []
    async for chunk in backend.read_rows(sid, 0, boundary + 1 if boundary >= 0 else 0):
        rows.extend(chunk)
    if not 0 <= boundary < len(rows) or boundary > record.head:
        raise ValidationError(
            f"session {sid!r}: fork boundary {boundary} is outside the stored log "
            f"(0..{record.head})",
            session_id=sid,
            seq=boundary,
        )
    verify_rows(rows, GENESIS_HASH, 0, session_id=sid)
    open_turn = _open_turn_at(rows)
    if open_turn is not None:
        raise ValidationError(
            f"session {sid!r}: fork boundary {boundary} is inside turn {open_turn}, "
            "which is still open there",
            session_id=sid,
            seq=boundary,
            hint="fork at the turn/end of a turn, or before its turn/start",
        )
    child_id = wanted if wanted is not None else new_session_id()
    info = types.get("session/forked")
    assert info is not None
    forked_data = SessionForked(parent=sid, boundary=boundary)
    _, raw = encode_payload(info, forked_data, session_id=child_id, seq=boundary + 1)
    # One reading of the clock for the child's creation and its ``session/forked``: a
    # second reading for either could fall on an earlier millisecond than the other, and
    # the marker would predate the session it opens. A parent whose last event is later
    # still (another writer's clock ahead of ours) keeps the log's times non-decreasing.
    created = time.time_ns() // 1_000_000
    stamp = max(created, rows[-1].time)
    # The child's chain is its own (format 2, bound to its id), whatever the parent's.
    rows = rechain(rows, child_id)
    forked = make_row(
        rows[-1].hash, boundary + 1, "session/forked", stamp, None, (), False, raw, child_id
    )
    child = SessionRecord(
        id=child_id,
        created_at=created,
        parent_id=sid,
        fork_seq=boundary,
        metadata=dict(record.metadata),
        head=boundary + 1,
    )
    await backend.create_session(child, [*rows, forked])
    return child_id


def _open_turn_at(rows: Sequence[Row]) -> int | None:
    """The number of the turn still open after ``rows``, or ``None``."""
    open_turn: int | None = None
    for row in rows:
        if row.type == "turn/start":
            open_turn = int(msgspec.json.decode(row.data).get("turn", 0))
        elif row.type == "turn/end":
            open_turn = None
    return open_turn
