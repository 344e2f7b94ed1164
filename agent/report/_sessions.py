"""One row per session for the lists: id, counts, state (``running`` for a live writer)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from eventlog import EventLogError, SessionInfo
from eventlog.stores import LogStore, writer_alive
from projections import timeline

from ._fates import session_state
from ._load import load_session
from ._unknown import UnknownType

__all__ = ("describe_session", "describe_sessions", "fault_json", "unknown_json")


def unknown_json(unknown: UnknownType | None) -> dict[str, Any] | None:
    """An event of an unknown type as JSON, shaped like :func:`fault_json`'s findings."""
    if unknown is None:
        return None
    message = f"{unknown} ({unknown.hint})"
    return {"error": "UnknownType", "seq": unknown.seq, "type": unknown.type, "message": message}


def fault_json(fault: EventLogError | None) -> dict[str, Any] | None:
    """An integrity finding as JSON: the error class, the seq it names and the message."""
    if fault is None:
        return None
    return {"error": type(fault).__name__, "seq": fault.seq, "message": str(fault)}


async def describe_session(store: LogStore, info: SessionInfo) -> dict[str, Any]:
    """One row of ``sessions``: the listed record's fields (:class:`SessionInfo`, its head
    shown as the count of ``events``), then what reading the session found (``turns``,
    ``state``, ``error``). A session that cannot be read is reported, never raised."""
    listed = msgspec.structs.asdict(info)
    head = listed.pop("head")
    row: dict[str, Any] = {
        **listed,
        "events": head + 1,
        "turns": 0,
        "state": "corrupt",
        "error": None,
    }
    if info.error is not None:
        row["error"] = {"error": "SessionInfo", "seq": None, "message": info.error}
        return row
    try:
        loaded = await load_session(store, info.id)
    except EventLogError as exc:
        row["error"] = fault_json(exc)
        return row
    line = timeline(loaded.session)
    row["turns"] = line.next_turn - 1
    running = await writer_alive(store, info.id)
    row["state"] = session_state(
        loaded.session, loaded.fault, running=running, unknown=loaded.unknown
    )
    row["error"] = fault_json(loaded.fault) or unknown_json(loaded.unknown)
    return row


async def describe_sessions(store: LogStore, infos: Sequence[SessionInfo]) -> list[dict[str, Any]]:
    """The rows of ``sessions`` for the listed ``infos`` (see :func:`describe_session`), less
    those deleted since they were listed: on a store in use, sessions come and go while they
    are described, and one that is gone is not corrupt."""
    rows = [await describe_session(store, info) for info in infos]
    return [row for row in rows if (row["error"] or {}).get("error") != "SessionNotFoundError"]
