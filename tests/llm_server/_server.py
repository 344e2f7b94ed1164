"""A loopback HTTP server that plays scripted provider replies and records what it received.

Starlette serves, uvicorn runs it on a thread of its own (its own event loop), and
sse-starlette writes the server-sent events, so what the SDKs read is real HTTP on a real
socket. The socket is bound before the thread starts: the URL is usable at once, and requests
made before uvicorn accepts wait in the listen backlog (no polling for readiness).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

__all__ = ("LLMServer", "Received", "Reply", "StreamCut")


class StreamCut(Exception):
    """Raised inside a reply's stream to drop the connection mid-body (``Reply.cut_after``)."""


@dataclass
class Reply:
    """One scripted HTTP reply.

    :ivar events: server-sent events (``{"event": name?, "data": str | json-able}``); a reply
        with events streams them with status 200.
    :ivar body: a JSON body (with ``status``), for errors and non-streamed replies.
    :ivar status: the HTTP status of a ``body`` reply.
    :ivar headers: extra response headers (``retry-after``...).
    :ivar delay: seconds before the response starts (to outlast a client's timeout).
    :ivar cut_after: drop the connection after this many events (no clean end of body).
    :ivar burst: send all events as one body instead of one write each (for benchmarks: the
        client then parses at its own speed, not the server's).
    :ivar hold_after: after this many events, set ``reached`` and send nothing more until the
        client goes away or the server stops.
    :ivar disconnected: set once the stream is over: all sent, cut, or the client gone.
    """

    events: Sequence[dict[str, Any]] = ()
    body: Any = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    cut_after: int | None = None
    burst: bool = False
    hold_after: int | None = None
    reached: threading.Event = field(default_factory=threading.Event)
    disconnected: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True)
class Received:
    """A request as the server got it: method, path, headers (lower-cased) and JSON body."""

    method: str
    path: str
    headers: dict[str, str]
    json: Any


class LLMServer:
    """Serve scripted replies on 127.0.0.1, any path, one reply per request in order.

    Use as a context manager (``with LLMServer() as server:``) or ``start()`` / ``stop()``.
    A request beyond the script gets a 500 whose message says so.

    :ivar url: ``http://127.0.0.1:<port>``.
    :ivar received: every request, in arrival order.
    """

    def __init__(self, *replies: Reply) -> None:
        self._replies: list[Reply] = list(replies)
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        app = Starlette(routes=[Route("/{path:path}", self._handle, methods=["GET", "POST"])])
        config = uvicorn.Config(app, log_level="critical", lifespan="off", loop="asyncio")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, name="llm-server", daemon=True)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()

    # -- script and records ---------------------------------------------------------------------

    def script(self, *replies: Reply) -> None:
        """Queue more replies, after those already queued."""
        with self._lock:
            self._replies.extend(replies)

    @property
    def bodies(self) -> list[Any]:
        """The JSON bodies received, in order."""
        return [r.json for r in self.received]

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> LLMServer:
        self._thread.start()
        self._ready.wait()
        return self

    def stop(self) -> None:
        """Release held and delayed replies, close connections, join the thread."""
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._server.should_exit = True
        self._thread.join()
        self._sock.close()

    def __enter__(self) -> LLMServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self._ready.set()
        await self._server.serve(sockets=[self._sock])

    # -- serving --------------------------------------------------------------------------------

    async def _handle(self, request: Request) -> Response:
        raw = await request.body()
        with self._lock:
            self.received.append(
                Received(
                    method=request.method,
                    path=request.url.path,
                    headers={k.lower(): v for k, v in request.headers.items()},
                    json=json.loads(raw) if raw else None,
                )
            )
            reply = self._replies.pop(0) if self._replies else None
        if reply is None:
            message = f"llm server: no scripted reply left for request {len(self.received)}"
            return JSONResponse({"error": {"message": message}}, status_code=500)
        if reply.delay:
            await self._pause(reply.delay)
        if not reply.events:
            return JSONResponse(reply.body, status_code=reply.status, headers=reply.headers)
        if reply.burst:
            body = b"".join(_event(event).encode() for event in reply.events)
            return Response(body, media_type="text/event-stream", headers=reply.headers)
        return EventSourceResponse(self._events(reply), headers=reply.headers, ping=3600)

    async def _pause(self, seconds: float) -> None:
        assert self._stopping is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    async def _events(self, reply: Reply) -> AsyncIterator[ServerSentEvent]:
        assert self._stopping is not None
        try:
            for sent, event in enumerate(reply.events):
                if sent == reply.cut_after:
                    raise StreamCut(f"cut after {sent} events")
                if sent == reply.hold_after:
                    reply.reached.set()
                    await self._stopping.wait()
                    return
                yield _event(event)
        finally:
            reply.disconnected.set()


def _event(event: dict[str, Any]) -> ServerSentEvent:
    data = event["data"]
    return ServerSentEvent(
        data=data if isinstance(data, str) else json.dumps(data), event=event.get("event")
    )
