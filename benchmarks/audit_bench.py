"""The audit tools' figures (``python -m benchmarks audit``).

- ``eventlog show`` on a 60,000-event SQLite session: time to the first row and in total,
  printing every event (``--all``) and with the default limit, as a subprocess reading a pipe;
- ``eventlog serve``: time to the first byte (and to the last) of the page of an 18,000-event
  session, over HTTP on loopback.
"""

from __future__ import annotations

import http.client
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

from eventlog import open_store

from ._harness import Figure, Stats, print_figure
from .workload import EVENTS_PER_TURN, append_turn

__all__ = ("main",)


async def _fill(url: str, sizes: dict[str, int]) -> None:
    async with open_store(url) as store:
        for sid, events in sizes.items():
            session = await store.create(sid)
            for turn in range(1, events // EVENTS_PER_TURN + 1):
                append_turn(session, turn)
                if turn % 100 == 0:
                    await session.flush()
            await session.aclose()


def _show(url: str, *args: str) -> tuple[float, float]:
    """Seconds to the first event row, and to the end, of ``eventlog show`` read from a pipe."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "eventlog", "--db", url, "show", "big", *args],
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    proc.stdout.readline()  # the header (text) or the document's opening line (JSON)
    proc.stdout.readline()
    first = time.perf_counter() - start
    for _ in proc.stdout:
        pass
    proc.wait()
    return first, time.perf_counter() - start


def _serve_page(url: str, runs: int) -> tuple[Stats, Stats]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "eventlog", "--db", url, "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        found = re.search(r"http://127\.0\.0\.1:(\d+)/", proc.stdout.readline())
        assert found, "eventlog serve did not start"
        port = int(found[1])
        firsts: list[float] = []
        totals: list[float] = []
        for _ in range(runs):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            start = time.perf_counter()
            conn.request("GET", "/s/mid")
            reply = conn.getresponse()
            reply.read(1)
            firsts.append(time.perf_counter() - start)
            reply.read()
            totals.append(time.perf_counter() - start)
            conn.close()
        return Stats(tuple(firsts)), Stats(tuple(totals))
    finally:
        proc.terminate()
        proc.wait()


def main(*, quick: bool = False) -> None:
    runs = 2 if quick else 5
    with tempfile.TemporaryDirectory(prefix="eventlog-audit-bench-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'audit.db'}"
        anyio.run(_fill, url, {"big": 60_012, "mid": 18_000})
        for label, args in (
            ("show 60,000 events --all", ("--all",)),
            ("show 60,000 events (default limit 500)", ()),
            ("show 60,000 events --all --json", ("--all", "--json")),
        ):
            results = [_show(url, *args) for _ in range(runs)]
            first = Stats(tuple(r[0] for r in results))
            total = Stats(tuple(r[1] for r in results))
            print_figure(Figure(f"{label}: first row", first, "s"))
            print_figure(Figure(f"{label}: total", total, "s"))
        first, total = _serve_page(url, runs)
        print_figure(Figure("serve: page of an 18,000-event session, first byte", first, "s"))
        print_figure(Figure("serve: page of an 18,000-event session, last byte", total, "s"))
