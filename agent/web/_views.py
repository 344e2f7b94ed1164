"""What each page shows, as plain values for the templates (no HTTP here).

Every view reads the session through :func:`agent.report.load_session` (read-only, a damaged
log up to its first bad event) and classes calls with :mod:`agent.report`, so the page says
what ``eventlog audit`` says.
"""

from __future__ import annotations

from typing import Any, get_args

import msgspec

from eventlog import Event, RequestHeader, Session, ValidationError
from eventlog.stores import LogStore, SessionRecord, writer_alive
from projections import messages, request_header, timeline

from ..report import (
    RunSpan,
    SessionState,
    call_row,
    describe_sessions,
    event_summary,
    failed_attempts,
    load_session,
    message_text,
    run_spans,
    session_state,
    timestamp,
)

__all__ = (
    "FATES",
    "events_page",
    "fate_class",
    "seen_view",
    "session_view",
    "sessions_view",
)

#: Every fate a bar can have, in the legend's order, with what it means.
FATES = (
    ("completed", "completed"),
    ("error", "error (with its code)"),
    ("not started", "not started"),
    ("outcome unknown", "outcome unknown (may have run)"),
    ("recovered", "recovered from its logged outcome"),
    ("awaiting approval", "awaiting a person's decision"),
    ("denied", "denied by a person (never ran)"),
    ("interrupted", "interrupted turn (closed by recovery)"),
    ("aborted", "turn stopped early (cancelled, blocked, max tokens)"),
    ("open", "open (in progress, or cut by a crash)"),
)
#: ``turn/end`` reasons drawn as one of the fates above.
_TURN_FATES = {"blocked": "aborted", "max-tokens": "aborted"}
_PAGE = 200


def fate_class(fate: str) -> str:
    """The CSS class of a fate: ``outcome unknown`` -> ``fate-outcome-unknown``."""
    return "fate-" + fate.replace(" ", "-")


async def sessions_view(
    store: LogStore, *, state: str | None, meta: str | None, after: str | None
) -> dict[str, Any]:
    """One page of sessions, filtered by state and by one ``key=value`` of their metadata."""
    key, _, value = (meta or "").partition("=")
    rows: list[dict[str, Any]] = []
    cursor = after
    scanned_all = False
    while len(rows) < 50 and not scanned_all:
        infos = await store.list(after=cursor, limit=_PAGE)
        scanned_all = len(infos) < _PAGE
        for info in infos:
            cursor = info.id
            if key and str(info.metadata.get(key)) != value:
                continue
            described = await describe_sessions(store, [info])
            if not described:  # deleted since it was listed: gone, not corrupt
                continue
            row = described[0]
            if state and row["state"] != state:
                continue
            row["created"] = timestamp(row["created_at"])
            row["last"] = timestamp(row["last_time"])
            rows.append(row)
            if len(rows) >= 50:
                break
    return {
        "rows": rows,
        "state": state or "",
        "meta": meta or "",
        "states": get_args(SessionState),
        "next_after": None if scanned_all else cursor,
    }


def _layout(spans: list[RunSpan], total: int) -> list[dict[str, Any]]:
    """The timeline's rows: each span as a bar placed on the seq axis (``left``/``width`` in
    percent of the log), depth-first, so a step's calls stand under it in commit order."""
    rows: list[dict[str, Any]] = []
    scale = 100.0 / max(total, 1)

    def place(span: RunSpan, depth: int) -> None:
        end = span.end if span.end is not None else total - 1
        code = (span.attrs.get("error") or {}) if span.kind == "tool" else {}
        label = span.name
        if span.kind == "tool" and span.fate == "error" and code:
            label += f" · {code['code']}"
        elif span.kind == "model" and span.fate == "error":
            label += " · failed attempt"
        rows.append(
            {
                "span": span,
                "depth": depth,
                "label": label,
                "fate": span.fate,
                "css": fate_class(_TURN_FATES.get(span.fate, span.fate)),
                "left": round(span.start * scale, 3),
                "width": round(max((end - span.start + 1) * scale, 0.4), 3),
                "seqs": " ".join(f"{k}={v}" for k, v in span.seqs.items()),
                "seen_at": span.end - 1 if span.kind == "model" and span.end else None,
            }
        )
        for child in span.children:
            place(child, depth + 1)

    for span in spans:
        place(span, 0)
    return rows


async def _lineage(store: LogStore, record: SessionRecord) -> dict[str, Any]:
    children: list[dict[str, Any]] = []
    after: str | None = None
    while True:
        infos = await store.list(after=after, limit=_PAGE)
        children += [
            {"id": i.id, "fork_seq": i.fork_seq} for i in infos if i.parent_id == record.id
        ]
        if len(infos) < _PAGE:
            break
        after = infos[-1].id
    return {"parent": record.parent_id, "fork_seq": record.fork_seq, "children": children}


#: Turns a session page draws at once (a long session is paged by turn; an export has all).
TURNS_PER_PAGE = 50


def _window(spans: list[RunSpan], first_turn: int | None, per_page: int | None) -> dict[str, Any]:
    """Which turns a page draws: ``per_page`` of them from ``first_turn`` (default: the
    latest), or every turn when ``per_page`` is ``None``."""
    numbers = [s.turn for s in spans]
    if per_page is None or len(numbers) <= per_page:
        return {
            "turns": set(numbers),
            "first": None,
            "prev": None,
            "next": None,
            "total": len(numbers),
        }
    start = len(numbers) - per_page
    if first_turn is not None:
        start = max(
            0, min(start, next((i for i, n in enumerate(numbers) if n >= first_turn), start))
        )
    shown = numbers[start : start + per_page]
    return {
        "turns": set(shown),
        "first": shown[0],
        "last": shown[-1],
        "prev": numbers[max(0, start - per_page)] if start > 0 else None,
        "next": numbers[start + per_page] if start + per_page < len(numbers) else None,
        "total": len(numbers),
    }


async def session_view(
    store: LogStore,
    session_id: str,
    *,
    first_turn: int | None = None,
    per_page: int | None = TURNS_PER_PAGE,
) -> dict[str, Any]:
    """The session page: state, timeline bars, the audit table, failed attempts, integrity,
    lineage. The bars and calls are those of ``per_page`` turns from ``first_turn`` (default:
    the latest turns; ``per_page=None``: every turn).

    :raises SessionNotFoundError: no such session.
    """
    loaded = await load_session(store, session_id)
    session = loaded.session
    running = await writer_alive(store, session.id)
    spans = run_spans(session)
    window = _window(spans, first_turn, per_page)
    shown = window["turns"]
    calls = [
        call_row(session, c, running=running) for c in timeline(session).calls() if c.turn in shown
    ]
    for call in calls:
        call["css"] = fate_class(call["outcome"])
        approval = call["approval"]
        if approval is not None:  # the times as the page shows every time
            approval["requested_time"] = timestamp(approval["requested_at"])
            approval["decided_time"] = timestamp(approval["decided_at"])
    return {
        "id": session.id,
        "count": session.head + 1,
        "stored": loaded.stored_events,
        "head": session.head,
        "state": session_state(session, loaded.fault, running=running, unknown=loaded.unknown),
        "running": running,
        "bars": _layout([s for s in spans if s.turn in shown], session.head + 1),
        "window": window,
        "calls": calls,
        "attempts": failed_attempts(session),
        "fault": loaded.fault,
        "lineage": await _lineage(store, loaded.record),
        "metadata": loaded.record.metadata,
        "fates": FATES,
        "fate_class": fate_class,
    }


def _header_rows(before: RequestHeader, after: RequestHeader) -> list[dict[str, Any]]:
    def show(header: RequestHeader, name: str) -> str:
        value = getattr(header, name)
        if name == "tools" and value is not None:
            return ", ".join(t.name for t in value)
        if value is None:
            return ""
        return value if isinstance(value, str) else msgspec.json.encode(value).decode()

    return [
        {
            "field": name,
            "before": show(before, name),
            "after": show(after, name),
            "changed": show(before, name) != show(after, name),
        }
        for name in RequestHeader.__struct_fields__
    ]


def _previous_request(session: Session, at: int) -> int | None:
    """The seq the model request before the one at ``at`` saw (``None``: there was none)."""
    spans = [s for t in run_spans(session) for st in t.children for s in st.children]
    seen = [s.end - 1 for s in spans if s.kind == "model" and s.end is not None]
    earlier = [seq for seq in seen if seq < at]
    return earlier[-1] if earlier else None


async def seen_view(store: LogStore, session_id: str, at: int | None) -> dict[str, Any]:
    """What the model saw after event ``at`` (default: the head), beside the request header in
    force then and how it differs from the previous model request's.

    :raises SessionNotFoundError: no such session.
    :raises ValidationError: ``at`` is not a seq of the log.
    """
    loaded = await load_session(store, session_id)
    session = loaded.session
    seq = session.head if at is None else at
    if at is not None and not 0 <= at <= session.head:  # as `eventlog replay --at` does
        raise ValidationError(
            f"at={seq}: session {session.id!r} has events 0..{session.head}; at is one of them"
        )
    history = messages(session, at=seq)
    previous = _previous_request(session, seq)
    now = request_header(session, at=seq)
    before = request_header(session, at=previous) if previous is not None else RequestHeader()
    return {
        "id": session.id,
        "at": seq,
        "previous": previous,
        "messages": [
            {
                "role": m.role,
                "source": m.source.kind if m.source is not None else "",
                "text": message_text(m),
            }
            for m in history
        ],
        "header": _header_rows(before, now),
    }


def _event_row(event: Event) -> dict[str, Any]:
    return {
        "seq": event.seq,
        "time": timestamp(event.time),
        "type": event.type,
        "ignorable": event.ignorable,
        "summary": event_summary(event),
    }


async def events_page(
    store: LogStore, session_id: str, *, first: int, limit: int, kind: str | None
) -> dict[str, Any]:
    """One page of raw events from seq ``first``, of type (or namespace) ``kind``."""
    loaded = await load_session(store, session_id)
    rows: list[dict[str, Any]] = []
    next_from: int | None = None
    prefix = (kind or "").rstrip("/") + "/"
    for event in await loaded.session.events(first):
        if kind and event.type != kind and not event.type.startswith(prefix):
            continue
        if len(rows) >= limit:
            next_from = event.seq
            break
        rows.append(_event_row(event))
    return {
        "id": loaded.session.id,
        "rows": rows,
        "first": first,
        "limit": limit,
        "type": kind or "",
        "next_from": next_from,
        "prev_from": max(0, first - limit) if first > 0 else None,
        "fault": loaded.fault,
    }
