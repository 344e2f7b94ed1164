"""``sessions`` (one row per session, paginated) and ``show`` (one session's events, streamed)."""

from __future__ import annotations

import argparse
import shlex
import textwrap

import msgspec

from eventlog import Event, EventLogError
from eventlog.stores import encode_surface

from ...report import describe_sessions, event_json, event_summary, fault_json, timestamp
from .._context import Context, open_cli_store, stored_record
from .._errors import EXIT_FINDINGS, EXIT_OK, CliError, states_exit
from .._safe import terminal_safe
from .._stream import verified_events
from .._tables import Column, fitted_table, kept_columns, styled
from .base import Command, add_salvage, non_negative, positive

__all__ = ("SESSIONS", "SHOW", "DEFAULT_SHOW_LIMIT")

#: How each state is coloured on a terminal.
_STATE_STYLE = {
    "balanced": "green",
    "running": "blue",
    "needs repair": "red",
    "corrupt": "bold red",
    "unknown type": "magenta",
    "awaiting approval": "yellow",
    "awaiting agent": "cyan",
}
_SESSION_COLUMNS = (
    Column("id", priority=10, min_width=10),
    Column("state", priority=9, min_width=12),
    Column("events", priority=8, justify="right"),
    Column("last activity", priority=6, min_width=24),
    Column("turns", priority=5, justify="right"),
    Column("created", priority=4, min_width=24),
)


def _configure_sessions(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--after", metavar="ID", help="list sessions with ids after ID")
    parser.add_argument(
        "--limit", type=positive, default=50, metavar="N", help="sessions per page (50)"
    )


async def _run_sessions(args: argparse.Namespace, ctx: Context) -> int:
    async with open_cli_store(ctx.url, types=ctx.types) as store:
        infos = await store.list(after=args.after, limit=args.limit)
        rows = await describe_sessions(store, infos)
    after = infos[-1].id if len(infos) == args.limit else None
    # One rule with audit, verify and recover: 1 when a listed session is damaged or needs
    # repair (this page's sessions; the next page answers for its own).
    code = states_exit(row["state"] for row in rows)
    if ctx.out.json_mode:
        ctx.out.json({"sessions": rows, "next_after": after})
        return code
    console = ctx.out.console
    cells = [
        {
            "id": row["id"],
            "created": timestamp(row["created_at"]),
            "events": str(row["events"]),
            "turns": str(row["turns"]),
            "last activity": timestamp(row["last_time"]),
            "state": styled(row["state"], _STATE_STYLE[row["state"]]),
        }
        for row in rows
    ]
    console.print(fitted_table(_SESSION_COLUMNS, cells, console.width))
    for row in rows:
        if row["error"] is not None:
            ctx.out.warn(row["error"]["message"])
    if after is not None:
        ctx.out.line(f"more: eventlog sessions --after {after}")
    return code


# -- show --------------------------------------------------------------------------------------

#: Events ``show`` prints unless told otherwise (``--limit``, ``--all``).
DEFAULT_SHOW_LIMIT = 500
_SHOW_COLUMNS = (
    Column("seq", priority=10, min_width=6, justify="right"),
    Column("time", priority=5, min_width=24),
    Column("type", priority=9, min_width=20),
    Column("surface", priority=3, min_width=8),
    Column("sources", priority=2, min_width=7),
    Column("summary", priority=8, min_width=24),
)


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
    parser.add_argument(
        "--from",
        dest="first",
        type=non_negative,
        metavar="SEQ",
        default=0,
        help="only events from SEQ on (default: 0)",
    )
    parser.add_argument(
        "--to",
        dest="last",
        type=non_negative,
        metavar="SEQ",
        help="only events up to SEQ, itself included",
    )
    parser.add_argument(
        "--limit",
        type=positive,
        default=DEFAULT_SHOW_LIMIT,
        metavar="N",
        help=f"print at most N events ({DEFAULT_SHOW_LIMIT}), then a `more:` hint",
    )
    parser.add_argument("--all", action="store_true", help="print every matching event")
    add_salvage(parser)


class _Turns:
    """Tracks the turn each event belongs to (``turn/start`` through ``turn/end``)."""

    def __init__(self) -> None:
        self.current: int | None = None

    def of(self, event: Event) -> int | None:
        if event.type == "turn/start":
            self.current = event.data.turn
        turn = self.current if self.current is not None else getattr(event.data, "turn", None)
        if event.type == "turn/end":
            self.current = None
        return turn


async def _run_show(args: argparse.Namespace, ctx: Context) -> int:
    limit = None if args.all else args.limit
    shown, more, fault = 0, None, None
    if args.last is not None and args.last < args.first:
        raise CliError(f"--to {args.last} is before --from {args.first}: no seq is in between")
    async with open_cli_store(ctx.url, types=ctx.types) as store:
        record = await stored_record(store, args.session_id)
        if args.first > max(0, record.head):  # as replay --at: a seq the log does not have
            raise CliError(
                f"--from {args.first}: session {record.id!r} has events 0..{record.head}; "
                "SEQ is one of them"
            )
        printer = _JsonPrinter(ctx, record.id) if ctx.out.json_mode else _TextPrinter(ctx)
        turns = _Turns()
        try:
            async for event, version in verified_events(store, record):
                if args.last is not None and event.seq > args.last:
                    break
                if not _wanted(args, event, turns.of(event)):
                    continue
                if limit is not None and shown >= limit:
                    more = event.seq
                    break
                printer.event(event, version)
                shown += 1
        except EventLogError as exc:
            if exc.seq is None:
                raise
            fault = exc
    printer.end(fault, None if more is None else _more_hint(args, more))
    if fault is not None:
        what = "events after it are not shown" if args.salvage else "pass --salvage to say so"
        ctx.out.warn(f"{fault}; {what}")
        return EXIT_FINDINGS
    return EXIT_OK


def _more_hint(args: argparse.Namespace, seq: int) -> str:
    words = ["eventlog", "show", args.session_id, "--from", str(seq)]
    for kind in args.types or ():
        words += ["--type", kind]
    if args.turn is not None:
        words += ["--turn", str(args.turn)]
    if args.last is not None:
        words += ["--to", str(args.last)]
    if args.limit != DEFAULT_SHOW_LIMIT:
        words += ["--limit", str(args.limit)]
    return shlex.join(words)


def _wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters, words whole where they fit."""
    return textwrap.wrap(text, width) or [""]


def _versioned(type_: str, version: int) -> str:
    # The stored payload version, shown where it is past the first (the event was upcast on read).
    return type_ if version == 1 else f"{type_} (v{version})"


class _TextPrinter:
    """Rows of fixed-width columns, each printed as it comes; the summary wraps in its column."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        width = ctx.out.width
        kept = kept_columns(_SHOW_COLUMNS, width)
        fixed = sum(c.narrowest + 1 for c in kept if c.name != "summary")
        self._widths = {c.name: c.narrowest for c in kept}
        self._widths["summary"] = max(_SHOW_COLUMNS[-1].narrowest, width - fixed)
        self._columns = kept
        self._line({c.name: c.name for c in kept})

    def _line(self, cells: dict[str, str]) -> None:
        # Every cell wraps in its own column (a long type such as ``app/x (v2) (ignorable)``
        # as well as the summary), so no cell pushes the columns after it out of line. Cells
        # are measured as they will print: escaped.
        wrapped = {
            c.name: _wrap(terminal_safe(cells[c.name]), self._widths[c.name]) for c in self._columns
        }
        lines = []
        for row in range(max(len(pieces) for pieces in wrapped.values())):
            parts = []
            for column in self._columns:
                pieces = wrapped[column.name]
                text = pieces[row] if row < len(pieces) else ""
                width = self._widths[column.name]
                parts.append(text.rjust(width) if column.justify == "right" else text.ljust(width))
            lines.append(" ".join(parts).rstrip())
        self._ctx.out.stdout.write("\n".join(lines) + "\n")

    def event(self, event: Event, version: int) -> None:
        self._line(
            {
                "seq": str(event.seq),
                "time": timestamp(event.time),
                "type": _versioned(event.type, version)
                + (" (ignorable)" if event.ignorable else ""),
                "surface": encode_surface(event.surface) or "",
                "sources": ",".join(map(str, event.sources)),
                "summary": event_summary(event),
            }
        )
        self._ctx.out.stdout.flush()

    def end(self, fault: EventLogError | None, more: str | None) -> None:
        if more is not None:
            self._ctx.out.line(f"more: {more}")


class _JsonPrinter:
    """One JSON document, written as it comes: the header, each event, then the trailer."""

    _encoder = msgspec.json.Encoder()

    def __init__(self, ctx: Context, session_id: str) -> None:
        self._out = ctx.out.stdout
        self._first = True
        self._out.write('{\n  "session": ' + self._encoder.encode(session_id).decode())
        self._out.write(',\n  "events": [')

    def event(self, event: Event, version: int) -> None:
        self._out.write("\n    " if self._first else ",\n    ")
        self._out.write(self._encoder.encode({**event_json(event), "version": version}).decode())
        self._first = False
        self._out.flush()

    def end(self, fault: EventLogError | None, more: str | None) -> None:
        trailer = {"fault": fault_json(fault), "more": more}
        body = self._encoder.encode(trailer).decode()[1:-1]
        self._out.write(("\n  ]," if not self._first else "],") + "\n  " + body + "\n}\n")
        self._out.flush()


def _wanted(args: argparse.Namespace, event: Event, turn: int | None) -> bool:
    if event.seq < args.first:
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
    "list sessions: id, created, events, turns, last activity, state (exit 1: one is "
    "corrupt or needs repair)",
    _configure_sessions,
    _run_sessions,
)
SHOW = Command(
    "show",
    "stream a session's events, filtered by type, turn and seq (at most --limit, then a hint)",
    _configure_show,
    _run_show,
)
