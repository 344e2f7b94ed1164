"""Processes the audit e2e tests run: ``eventlog serve`` and a Phoenix trace receiver, each on a
free loopback port, each waited for by the line it prints when ready (never by sleeping)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Debian's browser; Playwright drives it and never downloads one of its own.
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


#: The threads that read each ready process's output to its end, by pid.
_drains: dict[int, threading.Thread] = {}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_for_line(proc: subprocess.Popen[str], pattern: str, what: str) -> re.Match[str]:
    """Read ``proc``'s output until a line matches ``pattern``; fail with what it said if it
    ends first."""
    assert proc.stdout is not None
    said: list[str] = []
    for line in proc.stdout:
        said.append(line)
        found = re.search(pattern, line)
        if found:
            # Keep reading in the background, or a chatty server blocks on a full pipe.
            drain = threading.Thread(target=proc.stdout.read, daemon=True)
            drain.start()
            _drains[proc.pid] = drain
            return found
    pytest.fail(f"{what} ended before it was ready:\n" + "".join(said[-40:]))


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    drain = _drains.pop(proc.pid, None)
    if drain is not None:
        drain.join(timeout=30)  # the pipe's end: the process is gone
    if proc.stdout is not None:
        proc.stdout.close()


@contextmanager
def serving(url: str) -> Iterator[str]:
    """``eventlog serve`` over the store at ``url``; yields its base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "eventlog", "--db", url, "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        found = _wait_for_line(proc, r"serving (http://127\.0\.0\.1:\d+/)", "eventlog serve")
        yield found[1]
    finally:
        _stop(proc)


def phoenix_binary() -> Path:
    """Phoenix as ``make e2e-audit`` installs it (its own virtualenv: it pins much)."""
    path = Path(os.environ.get("PHOENIX_BIN", ROOT / ".venv-phoenix" / "bin" / "phoenix"))
    if not path.exists():
        pytest.fail(f"no Phoenix at {path}: run `make e2e-audit`, which installs it")
    return path


@contextmanager
def phoenix(workdir: Path) -> Iterator[str]:
    """``phoenix serve`` on loopback with its data in ``workdir``; yields its base URL."""
    port = free_port()
    env = {
        **os.environ,
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
        "PHOENIX_WORKING_DIR": str(workdir),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    proc = subprocess.Popen(
        [str(phoenix_binary()), "serve"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        _wait_for_line(proc, r"Application startup complete", "phoenix serve")
        yield f"http://127.0.0.1:{port}"
    finally:
        _stop(proc)
