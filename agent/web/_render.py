"""The pages as HTML: Jinja2 templates shipped in the package, the stylesheet and script
inlined in every page, so nothing is fetched from anywhere else (a page works offline, and an
exported file is one self-contained document)."""

from __future__ import annotations

import datetime as dt
from functools import cache
from importlib import resources
from typing import Any, NamedTuple

import jinja2

from eventlog import EventLogError
from eventlog.stores import LogStore

from ..report import counted
from ._views import events_page, seen_view, session_view

__all__ = ("ExportedPage", "asset", "export_html", "render")

#: Raw events an exported page carries (the rest are a command away: ``eventlog show``).
EXPORT_EVENTS = 2000


@cache
def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("agent.web", "templates"),
        autoescape=jinja2.select_autoescape(("html",), default=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.globals["counted"] = counted  # "1 event", "2 events", as the command says
    return environment


@cache
def asset(name: str) -> str:
    """A file of the package's ``static`` directory, as text."""
    return (resources.files("agent.web") / "static" / name).read_text(encoding="utf-8")


def render(template: str, *, root: str = "/", exported: str = "", **values: Any) -> str:
    """Render ``template`` with the inlined assets and the page-wide values."""
    page = _environment().get_template(template)
    return page.render(
        css=asset("app.css"),
        js="" if exported else asset("app.js"),
        root=root,
        exported=exported,
        **values,
    )


class ExportedPage(NamedTuple):
    """A session page as one file, and the damage its log has (``None``: verified)."""

    html: str
    fault: EventLogError | None


async def export_html(store: LogStore, session_id: str) -> ExportedPage:
    """The session page as one self-contained HTML document: timeline, tool calls, failed
    attempts, integrity, lineage, what the model saw last, and the first
    :data:`EXPORT_EVENTS` raw events. No script, no links it needs to follow. A damaged log
    is drawn up to its first bad event, and the page says so.

    :raises SessionNotFoundError: no such session.
    """
    view = await session_view(store, session_id, per_page=None)
    seen = await seen_view(store, session_id, None)
    events = await events_page(store, session_id, first=0, limit=EXPORT_EVENTS, kind=None)
    when = dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    html = render(
        "session.html",
        exported=when,
        live_url="",
        fragment_url="",
        seen=seen,
        events=events,
        **view,
    )
    return ExportedPage(html, view["fault"])
