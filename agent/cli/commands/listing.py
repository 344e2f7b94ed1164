"""``sessions`` (one row per session, paginated) and ``show`` (one session's events)."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Iterator
from typing import Any

from rich.table import Table
from rich.text import Text

from eventlog import Event, EventLogError, Session, SessionInfo
from eventlog.codec import encode_surface, stored_version
from eventlog.stores import LogStore
from projections import timeline

from ..context import Context, load_session, open_cli_store
from ..errors import EXIT_FINDINGS, EXIT_OK
from ..render import event_json, event_summary, fault_json, timestamp
from .base import Command, non_negative, positive

__all__ = ("SESSIONS", "SHOW", "session_state")

#: How each state is coloured on a terminal.
_STATE_STYLE = {
    "balanced": "green",
    "open turn": "yellow",
    "needs repair": "red",
    "corrupt": "bold red",
}


def _configure_sessions(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--after", metavar="ID", help="list sessions with ids after ID")
    parser.add_argument(
        "--limit", type=positive, default=50, metavar="N", help="sessions per page (50)"
    )


async def _run_sessions(args: argparse.Namespace, ctx: Context) -> int:
    async with open_cli_store(ctx.url) as store:
        infos = await store.list(after=args.after, limit=args.limit)
        rows = [await _describe(store, info) for info in infos]
    after = infos[-1].id if len(infos) == args.limit else None
    if ctx.out.json_mode:
        ctx.out.json({"sessions": rows, "next_after": after})
        return EXIT_OK
    table = Table("id", "created", "events", "turns", "last activity", "state")
    for row in rows:
        state = row["state"]
        table.add_row(
            row["id"],
            timestamp(row["created_at"]),
            str(row["events"]),
            str(row["turns"]),
            timestamp(row["last_time"]),
            f"[{_STATE_STYLE[state]}]{state}[/]",
        )
    ctx.out.console.print(table)
    for row in rows:
        if row["error"] is not None:
            ctx.out.warn(row["error"]["message"])
    if after is not None:
        ctx.out.line(f"more: eventlog sessions --after {after}")
    return EXIT_OK


async def _describe(store: LogStore, info: SessionInfo) -> dict[str, Any]:
    """One row of ``sessions``; a session that cannot be read is reported, never raised."""
    row: dict[str, Any] = {
        "id": info.id,
        "created_at": info.created_at,
        "events": info.head + 1,
        "turns": 0,
        "last_time": info.last_time,
        "state": "corrupt",
        "parent_id": info.parent_id,
        "fork_seq": info.fork_seq,
        "metadata": info.metadata,
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
    row["state"] = session_state(loaded.session, loaded.fault)
    row["error"] = fault_json(loaded.fault)
    return row


def session_state(session: Session, fault: EventLogError | None) -> str:
    """``corrupt`` (the log fails verification), ``needs repair`` (calls of the open step await
    an answer), ``open turn`` (a turn is open but no answer is owed: a live run, or a crash
    between steps) or ``balanced``. Calls left unanswered in a closed step are not something
    repair can fix; ``audit`` reports them."""
    if fault is not None:
        return "corrupt"
    line = timeline(session)
    if line.dangling:
        return "needs repair"
    return "open turn" if line.turn is not None else "balanced"


def _configure_show(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session_id", metavar="ID")
    parser.add_argument(
        "--type",
        action="append",
        dest="types",
        metavar="TYPE",
        help="only this type, or namespace such as tool/ (repeatable)",
    )
    parser.add_argument("--turn", type=positive, metavar="N", help="only events of turn N")
    parser.add_argument("--from", dest="first", type=non_negative, metavar="SEQ", default=0)
    parser.add_argument("--to", dest="last", type=non_negative, metavar="SEQ")


async def _run_show(args: argparse.Namespace, ctx: Context) -> int:
    async with open_cli_store(ctx.url) as store:
        loaded = await load_session(store, args.session_id)
        versions = await _stored_versions(store, args.session_id)
    events = [e for e, turn in _with_turns(loaded.session.events()) if _wanted(args, e, turn)]
    if ctx.out.json_mode:
        ctx.out.json(
            {
                "session": args.session_id,
                "events": [{**event_json(e), "version": versions.get(e.seq, 1)} for e in events],
                "fault": fault_json(loaded.fault),
            }
        )
    else:
        table = Table("seq", "time", "type", "surface", "sources", "summary")
        for event in events:
            table.add_row(
                str(event.seq),
                timestamp(event.time),
                Text(_versioned(event.type, versions.get(event.seq, 1))),
                _surface_text(event),
                ",".join(map(str, event.sources)),
                Text(event_summary(event)),
                style="dim" if event.ignorable else None,
            )
        ctx.out.console.print(table)
    if loaded.fault is not None:
        ctx.out.warn(f"{loaded.fault}; events after it are not shown")
        return EXIT_FINDINGS
    return EXIT_OK


async def _stored_versions(store: LogStore, session_id: str) -> dict[int, int]:
    """The payload version each stored event was written as, where it is not 1."""
    versions: dict[int, int] = {}
    async for chunk in store.backend.read_rows(session_id, 0, None):
        for row in chunk:
            version = stored_version(row.data)
            if version != 1:
                versions[row.seq] = version
    return versions


def _versioned(type_: str, version: int) -> str:
    # The stored payload version, shown where it is past the first (upcast on read).
    return type_ if version == 1 else f"{type_} (v{version})"


def _surface_text(event: Event) -> str:
    return encode_surface(event.surface) or ""


def _with_turns(events: Iterable[Event]) -> Iterator[tuple[Event, int | None]]:
    """Each event with the turn it belongs to (``turn/start`` through ``turn/end``)."""
    current: int | None = None
    for event in events:
        if event.type == "turn/start":
            current = event.data.turn
        turn = current if current is not None else getattr(event.data, "turn", None)
        yield event, turn
        if event.type == "turn/end":
            current = None


def _wanted(args: argparse.Namespace, event: Event, turn: int | None) -> bool:
    if event.seq < args.first or (args.last is not None and event.seq > args.last):
        return False
    if args.turn is not None and turn != args.turn:
        return False
    if args.types:
        return any(
            event.type == t or event.type.startswith(t.rstrip("/") + "/") for t in args.types
        )
    return True


SESSIONS = Command(
    "sessions",
    "list sessions: id, created, events, turns, last activity, state",
    _configure_sessions,
    _run_sessions,
)
SHOW = Command(
    "show", "show a session's events, filtered by type, turn and seq", _configure_show, _run_show
)
