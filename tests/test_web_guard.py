"""The web app under foreign ``Host`` headers (DNS rebinding), and the security headers on
every response: pages, errors, unknown routes, the refusal itself; and a Content-Security-Policy
under which stored content cannot run script."""

from __future__ import annotations

import base64
import hashlib
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from eventlog import APPEND, Message, TurnEnd, TurnStart, UserMessage, open_store

from .cli_fixtures import url_of

#: Stored text that would run script if any page let it through.
HOSTILE = '<script>alert(1)</script><img src=x onerror="alert(2)"> javascript:alert(3)'
SERVED = ("127.0.0.1", "127.0.0.1:8765", "localhost", "LOCALHOST:80", "[::1]:8765", "box.lan")
HEADERS = {
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}


async def _fill(url: str) -> None:
    async with open_store(url) as store:
        session = await store.create("hostile", metadata={"note": HOSTILE})
        session.append("turn/start", TurnStart(turn=1))
        session.append("user/message", UserMessage(message=Message.user(HOSTILE)), surface=APPEND)
        session.append("turn/end", TurnEnd(turn=1, reason="completed"))
        await session.aclose()


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("guard") / "guard.db"
    anyio.run(_fill, url_of(path))
    return path


@pytest.fixture(scope="module")
def client(db: Path) -> Iterator[TestClient]:
    from agent.web import create_app

    app = create_app(url_of(db), allowed_hosts=["box.lan"])
    with TestClient(app, base_url="http://127.0.0.1:8765") as test_client:
        yield test_client


def assert_secured(reply: httpx2.Response) -> None:
    for name, value in HEADERS.items():
        assert reply.headers.get(name) == value, (reply.status_code, name)
    policy = reply.headers["content-security-policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"
    # Script only by hash: never inline or eval at large, never from anywhere.
    assert re.fullmatch(r"'sha256-[A-Za-z0-9+/]+=*'", directives["script-src"])


@settings(max_examples=25, deadline=None)
@given(
    host=st.from_regex(r"[a-z0-9][a-z0-9.-]{0,30}(:[0-9]{1,5})?", fullmatch=True).filter(
        lambda h: h.split(":")[0].rstrip(".") not in ("localhost", "127.0.0.1", "box.lan")
    ),
    path=st.sampled_from(["/", "/s/hostile", "/s/hostile/events", "/s/nope", "/nothing"]),
)
def test_a_foreign_host_is_refused_before_any_route(
    client: TestClient, host: str, path: str
) -> None:
    # A rebinding page's name, on any route: 400, with the security headers, no content.
    reply = client.get(path, headers={"host": host})
    assert reply.status_code == 400
    assert "DNS rebinding" in reply.text and "hostile" not in reply.text
    assert_secured(reply)


@pytest.mark.parametrize(
    "host", ["127.0.0.1.evil.example", "localhost.evil.example", "evil.example:8765", "[::2]"]
)
def test_names_that_only_look_local_are_refused(client: TestClient, host: str) -> None:
    assert client.get("/", headers={"host": host}).status_code == 400


def test_several_host_headers_are_refused(db: Path) -> None:
    from agent.web import create_app

    # An empty --allow-host names nothing: it does not open the app to an empty Host.
    app = create_app(url_of(db), allowed_hosts=[""])
    with TestClient(app, base_url="http://127.0.0.1:8765") as test_client:
        # Two Host headers, a served one first: a proxy may route by the other, so neither
        # is trusted (uvicorn's httptools parser passes both on; the guard read the first).
        for hosts in (["localhost", "evil.example"], ["evil.example", "localhost"]):
            reply = test_client.get("/", headers=[("host", h) for h in hosts])
            assert reply.status_code == 400 and "several Host headers" in reply.text, hosts
            assert_secured(reply)
        reply = test_client.get("/", headers=[("host", "")])
        assert reply.status_code == 400 and "hostile" not in reply.text


def _raw_request(port: int, request_line: str, host: str) -> tuple[str, dict[str, str]]:
    """The status line and headers of one request sent as written (no client rewrites it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(f"{request_line}\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        reply = b""
        while chunk := conn.recv(65536):
            reply += chunk
    head = reply.partition(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
    return head[0], {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in head[1:])}


def test_request_targets_outside_every_route_are_guarded_too(db: Path) -> None:
    # The real server: request targets a browser never sends but a tester (or proxy) does.
    server = subprocess.Popen(
        [sys.executable, "-m", "eventlog", "--db", url_of(db), "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(re.findall(r":(\d+)/", server.stdout.readline())[0])
        # An absolute URI, `*` and an empty path match no mount: the router answers them
        # itself (404, or a redirect), and those answers used to pass no guard: no headers,
        # and no Host check (an absolute URI naming this app under a foreign Host got 404).
        for target, host, status in (
            ("GET http://evil.example/ HTTP/1.1", "localhost", "404"),
            ("OPTIONS * HTTP/1.1", "localhost", "404"),
            ("GET ?q HTTP/1.1", "localhost", "307"),
            ("GET http://localhost/ HTTP/1.1", "evil.example", "400"),
            ("OPTIONS * HTTP/1.1", "evil.example", "400"),
        ):
            line, headers = _raw_request(port, target, host)
            assert line.split()[1] == status, (target, host, line)
            for name, value in HEADERS.items():
                assert headers.get(name) == value, (target, host, name)
            assert "default-src 'none'" in headers["content-security-policy"]
    finally:
        server.send_signal(signal.SIGINT)
        _, err = server.communicate(timeout=30)
    assert server.returncode == 0, err


@pytest.mark.parametrize("host", SERVED)
def test_loopback_and_allowed_names_are_served(client: TestClient, host: str) -> None:
    reply = client.get("/s/hostile", headers={"host": host})
    assert reply.status_code == 200
    assert_secured(reply)


def test_every_kind_of_response_carries_the_headers(client: TestClient) -> None:
    # A page, a missing session (404), a bad parameter (400), an unknown route (404).
    for path, status in (
        ("/", 200),
        ("/s/hostile/seen", 200),
        ("/s/nope", 404),
        ("/s/hostile/events?from=x", 400),
        ("/no/such/route", 404),
    ):
        reply = client.get(path)
        assert reply.status_code == status, path
        assert_secured(reply)


def test_stored_content_cannot_run_script(client: TestClient) -> None:
    for path in ("/", "/s/hostile", "/s/hostile/seen", "/s/hostile/events"):
        reply = client.get(path)
        page = reply.text
        # The stored markup is text, escaped...
        assert "<script>alert(1)" not in page and "<img src=x" not in page, path
        # ... and the only script the policy runs is the page's own, by its hash.
        allowed = re.findall(r"'sha256-([^']+)'", reply.headers["content-security-policy"])
        for body in re.findall(r"<script>(.*?)</script>", page, flags=re.S):
            digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
            assert digest in allowed, path
        assert re.findall(r"<[a-z]+\s[^>]*\son[a-z]+=", page) == [], path  # no handlers


def test_an_exported_page_forbids_every_script(db: Path, tmp_path: Path) -> None:
    from agent.web import export_html

    async def export() -> str:
        async with open_store(url_of(db)) as store:
            return (await export_html(store, "hostile")).html

    page = anyio.run(export)
    assert "<script" not in page and "&lt;script&gt;alert(1)" in page
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert policy is not None and "default-src 'none'" in policy[1]
    assert "script-src" not in policy[1]


@pytest.mark.parametrize("after", ["-2", str(2**63), "99999999999999999999"])
def test_a_live_stream_from_a_seq_out_of_range_is_refused_before_it_starts(
    client: TestClient, after: str
) -> None:
    # The stream answered 200 and then failed inside (the store refused the seq), logging a
    # traceback on the server: now the parameter is checked first, 400 and one line.
    reply = client.get(f"/s/hostile/live?after={after}")
    assert reply.status_code == 400
    assert f"query parameter after=&#x27;{after}&#x27; is out of range" in reply.text
    assert_secured(reply)
