"""``eventlog serve``: a read-only Starlette app over one store.

Routes: ``/`` (sessions, filtered by ``state`` and ``meta=key=value``), ``/s/{id}`` (the
session page), ``/s/{id}/body`` (its live part, for the page's refresh), ``/s/{id}/seen?at=``
(what the model saw), ``/s/{id}/events`` (raw events, paged), ``/s/{id}/live?after=`` (new
events as Server-Sent Events, fed by ``store.follow``). Nothing writes to the store.
"""

from __future__ import annotations

import contextlib
import html
from collections.abc import AsyncIterator, Iterable
from typing import Any

import msgspec
from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Mount, Route

from eventlog import (
    EventLogError,
    EventTypes,
    SessionNotFoundError,
    ValidationError,
    open_store,
)
from eventlog.stores import LogStore

from ..report import event_summary
from ._guard import HostGuard
from ._render import render
from ._views import events_page, seen_view, session_view, sessions_view

__all__ = ("create_app",)

_encoder = msgspec.json.Encoder()


#: The range of a whole-number query parameter: a seq, a turn or a count is a 64-bit integer
#: (and a seq to read after has one more after it).
_INT64 = range(-(2**63), 2**63 - 1)


def _int(request: Request, name: str, default: int | None, low: int | None = None) -> int | None:
    """The whole-number query parameter ``name`` (``default`` when absent), checked here, so
    a view (the live stream above all, which answers 200 before it reads) never meets one
    the store refuses.

    :raises ValidationError: not a whole number, below ``low``, or past 64 bits.
    """
    text = request.query_params.get(name, "")
    if text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValidationError(f"query parameter {name}={text!r} is not a whole number") from None
    if value not in _INT64 or (low is not None and value < low):
        lowest = _INT64.start if low is None else low
        raise ValidationError(
            f"query parameter {name}={text!r} is out of range ({lowest} to {_INT64.stop - 1})"
        )
    return value


def create_app(
    store: LogStore | str,
    *,
    types: EventTypes | None = None,
    allowed_hosts: Iterable[str] = (),
) -> Starlette:
    """The web app over ``store``: an open store the caller keeps open while the app serves,
    or a store URL the app opens at startup and closes at shutdown (its lifespan; ``types``
    for the app's own event types).

    Every page is HTML; a missing session answers 404, a bad parameter 400, a damaged store
    500, each with the error's one-line message. A request whose ``Host`` is neither a
    loopback name or address nor one of ``allowed_hosts`` is refused with 400 (DNS
    rebinding); every response carries a Content-Security-Policy that runs no script but the
    page's own, and forbids framing and MIME sniffing (:mod:`agent.web._guard`).
    """
    if isinstance(store, str):
        return _app_opening(store, types, allowed_hosts)
    return _guarded(_app_over(store), allowed_hosts)


def _guarded(app: Any, allowed_hosts: Iterable[str], lifespan: Any = None) -> Starlette:
    """``app`` behind the guard, as the outermost middleware: every response passes it, the
    ones the outer router sends itself included (a request target that is an absolute URI or
    ``*`` matches no mount: 404; an empty path: a redirect). ``app`` is a Starlette of its own,
    so its last-resort 500 is sent from inside the guard too."""
    guard = Middleware(HostGuard, allowed_hosts=tuple(allowed_hosts))
    return Starlette(routes=[Mount("/", app=app)], middleware=[guard], lifespan=lifespan)


def _app_opening(url: str, types: EventTypes | None, allowed_hosts: Iterable[str]) -> Starlette:
    holder: dict[str, Starlette] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with open_store(url, types=types) as store:
            holder["app"] = _app_over(store)
            yield

    async def delegate(scope: Any, receive: Any, send: Any) -> None:
        await holder["app"](scope, receive, send)

    return _guarded(delegate, allowed_hosts, lifespan)


def _app_over(store: LogStore) -> Starlette:

    async def sessions(request: Request) -> Response:
        view = await sessions_view(
            store,
            state=request.query_params.get("state") or None,
            meta=request.query_params.get("meta") or None,
            after=request.query_params.get("after") or None,
        )
        return HTMLResponse(render("sessions.html", **view))

    async def session(request: Request) -> Response:
        sid = request.path_params["sid"]
        view = await session_view(store, sid, first_turn=_int(request, "turn", None))
        after = view["head"]
        return HTMLResponse(
            render(
                "session.html",
                live_url=f"/s/{sid}/live?after={after}",
                fragment_url=f"/s/{sid}/body"
                + (f"?{request.url.query}" if request.url.query else ""),
                seen=None,
                events=None,
                **view,
            )
        )

    async def body(request: Request) -> Response:
        turn = _int(request, "turn", None)
        view = await session_view(store, request.path_params["sid"], first_turn=turn)
        return HTMLResponse(render("_session_body.html", **view))

    async def seen(request: Request) -> Response:
        view = await seen_view(store, request.path_params["sid"], _int(request, "at", None))
        return HTMLResponse(render("seen.html", seen=view))

    async def events(request: Request) -> Response:
        view = await events_page(
            store,
            request.path_params["sid"],
            first=max(0, _int(request, "from", 0) or 0),
            limit=min(1000, max(1, _int(request, "limit", 100) or 100)),
            kind=request.query_params.get("type") or None,
        )
        return HTMLResponse(render("events.html", events=view))

    async def live(request: Request) -> Response:
        sid = request.path_params["sid"]
        after = _int(request, "after", -1, low=-1)
        await store.record(sid)  # 404 before the stream starts

        async def stream() -> AsyncIterator[dict[str, Any]]:
            follow = store.follow(sid, after=-1 if after is None else after)
            try:
                async for event in follow:
                    data = {"seq": event.seq, "type": event.type, "summary": event_summary(event)}
                    yield {
                        "event": "append",
                        "id": str(event.seq),
                        "data": _encoder.encode(data).decode(),
                    }
            except EventLogError as exc:
                # The log cannot be followed further (damaged, deleted or replaced): say why
                # and end the stream, rather than drop the connection in the middle of it
                # (the browser's EventSource would only reconnect and meet the same).
                yield {"event": "end", "data": _encoder.encode({"reason": str(exc)}).decode()}
            finally:
                with contextlib.suppress(Exception):
                    await follow.aclose()  # type: ignore[attr-defined]

        return EventSourceResponse(stream(), ping=15)

    async def not_found(request: Request, exc: Exception) -> Response:
        return _error_page(404, str(exc))

    async def bad_request(request: Request, exc: Exception) -> Response:
        return _error_page(400, str(exc))

    async def broken(request: Request, exc: Exception) -> Response:
        return _error_page(500, str(exc))

    return Starlette(
        routes=[
            Route("/", sessions),
            Route("/s/{sid}", session),
            Route("/s/{sid}/body", body),
            Route("/s/{sid}/seen", seen),
            Route("/s/{sid}/events", events),
            Route("/s/{sid}/live", live),
        ],
        exception_handlers={
            SessionNotFoundError: not_found,
            ValidationError: bad_request,
            EventLogError: broken,
        },
    )


def _error_page(status: int, message: str) -> Response:
    page = f"<!doctype html><title>{status}</title><p>{html.escape(message)}</p>"
    return HTMLResponse(page, status_code=status)
