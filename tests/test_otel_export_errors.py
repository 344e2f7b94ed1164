"""``export --format otlp`` when the receiver is not there or does not accept: one clear line
naming the endpoint and the reason, a non-zero exit, and none of the exporter's retry noise."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from .cli_fixtures import run_main, shared_runs_db


def dead_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class _Refuses(BaseHTTPRequestHandler):
    """An HTTP server that is not an OTLP receiver: every POST gets 400."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = b"not an OTLP receiver"
        self.send_response(400)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass  # the test reads the command's output, not the server's


@pytest.fixture
def refusing_server() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Refuses)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_dead_endpoint_fails_at_once_in_one_line(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    db = shared_runs_db(tmp_path_factory)
    endpoint = f"http://127.0.0.1:{dead_port()}"
    started = time.monotonic()
    result = run_main("export", "balanced", "--format", "otlp", "--endpoint", endpoint, db=db)
    took = time.monotonic() - started
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr  # no retry lines before it
    assert f"cannot reach the OTLP receiver at {endpoint}/v1/traces" in result.stderr
    assert "Connection refused" in result.stderr
    # One connection attempt, not the exporter's retries with backoff (which took ~10 s).
    assert took < 5, took


def test_a_receiver_that_does_not_accept_is_one_line_with_its_reason(
    tmp_path_factory: pytest.TempPathFactory, refusing_server: str
) -> None:
    db = shared_runs_db(tmp_path_factory)
    args = ("export", "balanced", "--format", "otlp", "--endpoint", refusing_server)
    result = run_main(*args, db=db)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert f"the OTLP receiver at {refusing_server}/v1/traces did not accept" in result.stderr
    assert "400" in result.stderr, result.stderr  # the exporter's reason, in the one line


def test_a_json_run_reports_the_same_as_one_object(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    db = shared_runs_db(tmp_path_factory)
    endpoint = f"http://127.0.0.1:{dead_port()}"
    result = run_main(
        "export", "balanced", "--format", "otlp", "--endpoint", endpoint, "--json", db=db
    )
    assert result.returncode == 2
    assert result.stderr.startswith('{"error":') and result.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("endpoint", "reason"),
    [
        ("http://[::1", "Invalid IPv6 URL"),  # urlsplit raised out of the check: a traceback
        ("http://127.0.0.1:99999/v1", "Port out of range"),
        ("notaurl", "expected http://host:port/"),
        ("ftp://127.0.0.1/x", "expected http://host:port/"),
    ],
)
def test_a_malformed_endpoint_is_one_line_naming_it(
    tmp_path_factory: pytest.TempPathFactory, endpoint: str, reason: str
) -> None:
    db = shared_runs_db(tmp_path_factory)
    result = run_main("export", "balanced", "--format", "otlp", "--endpoint", endpoint, db=db)
    assert result.returncode == 2 and result.stdout == "", result.stderr
    # Said as what it is (not a receiver nobody started), in one line.
    assert result.stderr.startswith(f"eventlog: error: OTLP endpoint {endpoint!r} is not a URL")
    assert reason in result.stderr and result.stderr.count("\n") == 1, result.stderr
