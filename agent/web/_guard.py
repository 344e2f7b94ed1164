"""What stands between the web app and the browser: the ``Host`` check and the security headers.

DNS rebinding: a page the user visits elsewhere points its own name at 127.0.0.1 and reads the
app as same-origin. The browser still sends that name in ``Host``, so a request whose ``Host``
is not one this app serves under (a loopback name or address, or one named at start) is refused
with 400 before any route runs. Every response (pages, errors, the live stream, 404s, the 400
itself) carries a Content-Security-Policy that runs only the page's own script (by its hash),
so stored content can never run script even if it reached the page unescaped, and headers that
forbid framing and MIME sniffing.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from typing import Any

from ._render import asset

__all__ = ("LOOPBACK_HOSTS", "HostGuard", "security_headers")

#: Names and addresses every app answers under: the loopback interface's.
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


def _script_hash() -> str:
    digest = hashlib.sha256(asset("app.js").encode()).digest()
    return "'sha256-" + base64.b64encode(digest).decode() + "'"


def security_headers() -> list[tuple[bytes, bytes]]:
    """The headers every response carries. Styles may be inline (the pages inline their
    stylesheet and place the timeline's bars with ``style``); scripts may not, except the
    page's own, named by its hash; nothing loads from anywhere but this origin."""
    policy = (
        f"default-src 'none'; script-src {_script_hash()}; style-src 'unsafe-inline'; "
        "img-src data:; connect-src 'self'; form-action 'self'; base-uri 'none'; "
        "frame-ancestors 'none'"
    )
    return [
        (b"content-security-policy", policy.encode()),
        (b"x-frame-options", b"DENY"),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"no-referrer"),
        (b"cross-origin-opener-policy", b"same-origin"),
        (b"cross-origin-resource-policy", b"same-origin"),
    ]


def host_name(host: str) -> str:
    """The name in a ``Host`` header value, without its port, brackets or trailing dot,
    lower-cased: ``[::1]:8765`` -> ``::1``, ``LocalHost.:80`` -> ``localhost``."""
    host = host.strip().lower()
    if host.startswith("["):
        host = host[1 : host.find("]")] if "]" in host else host[1:]
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    return host.rstrip(".")


class HostGuard:
    """ASGI middleware: refuse a request whose ``Host`` is not served, and add
    :func:`security_headers` to every response.

    :param app: the app guarded.
    :param allowed_hosts: names or addresses served besides :data:`LOOPBACK_HOSTS` (a bare
        name, no port: any port is accepted, as the port is not what rebinding changes).
    """

    def __init__(self, app: Any, allowed_hosts: Iterable[str] = ()) -> None:
        self._app = app
        # An empty name would serve a request with an empty Host: it names nothing.
        self._allowed = LOOPBACK_HOSTS | ({host_name(h) for h in allowed_hosts} - {""})
        self._headers = security_headers()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":  # lifespan; the app has no websocket route
            await self._app(scope, receive, send)
            return

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                names = {name.lower() for name, _ in message.get("headers", ())}
                extra = [(k, v) for k, v in self._headers if k not in names]
                message = {**message, "headers": [*message.get("headers", ()), *extra]}
            await send(message)

        hosts = _headers(scope, b"host")
        host = hosts[0] if len(hosts) == 1 else None
        if host is None or host_name(host) not in self._allowed:
            await _refuse(host, send_with_headers, several=len(hosts) > 1)
            return
        await self._app(scope, receive, send_with_headers)


def _headers(scope: Any, name: bytes) -> list[str]:
    return [
        bytes(value).decode("latin-1")
        for key, value in scope.get("headers", ())
        if key.lower() == name
    ]


async def _refuse(host: str | None, send: Any, *, several: bool = False) -> None:
    # Several Host headers: a proxy and this app could each read another one, so none is
    # trusted (uvicorn's h11 refuses them itself; its httptools parser passes them on).
    shown = "several Host headers" if several else "no Host header"
    shown = shown if host is None else f"Host {host!r}"
    body = (
        f"400 Bad Request: {shown} is not served here (DNS rebinding protection); "
        "use a loopback address, or start `eventlog serve --allow-host NAME`\n"
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 400,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
