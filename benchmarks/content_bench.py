"""Content: opening a session that references images costs what opening it without them costs.

An 18,000-event session (1,000 standard turns) whose user messages in every tenth turn carry an
image referencing one of 100 stored attachments of 200 KiB (20 MiB of attachments), against the
same session without the images. Open time and peak Python memory of ``open``, runs alternating;
then, for scale, the time to read and check all 100 attachments (``load_attachments``), and
what the agent spends on them per request: the first request of a session reads them all, a
later one (the history still referencing them) reuses what it read.
"""

from __future__ import annotations

import gc
import os
import tempfile
import time
import tracemalloc
from pathlib import Path

import anyio
import msgspec

from agent._loop._attachments import AttachmentCache
from eventlog import ImagePart, UserMessage, open_store
from projections import messages

from ._harness import Figure, Stats, print_figure
from .workload import EVENTS_PER_TURN, turn_events

__all__ = ("main",)

IMAGE_BYTES = 200 * 1024


async def _build(path: Path, turns: int, images: int) -> None:
    """The standard session of ``turns`` turns; with ``images``, one user message in every
    ``turns // images`` turns also shows an image stored as an attachment."""
    async with open_store(f"sqlite:///{path}", write_delay=60, max_pending_bytes=1 << 40) as store:
        digests = [await store.put_attachment(os.urandom(IMAGE_BYTES)) for _ in range(images)]
        every = turns // images if images else 0
        session = await store.create(session_id="big")
        for turn in range(1, turns + 1):
            for type_, data, surface in turn_events(turn):
                if type_ == "user/message" and every and turn % every == 0:
                    image = ImagePart(media_type="image/png", attachment=digests[turn // every - 1])
                    message = msgspec.structs.replace(
                        data.message, content=(*data.message.content, image)
                    )
                    data = UserMessage(message=message)
                session.append(type_, data, surface=surface)
            if turn % 500 == 0:
                await session.flush()
        await session.aclose()


async def _open(path: Path) -> float:
    async with open_store(f"sqlite:///{path}") as store:
        start = time.perf_counter()
        session = await store.open("big")
        elapsed = time.perf_counter() - start
        await session.aclose()
    return elapsed


async def _peak(path: Path) -> float:
    async with open_store(f"sqlite:///{path}") as store:
        gc.collect()
        tracemalloc.start()
        try:
            session = await store.open("big")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        await session.aclose()
    return peak / 2**20


async def _load_all(path: Path) -> float:
    async with open_store(f"sqlite:///{path}") as store:
        session = await store.open("big")
        start = time.perf_counter()
        loaded = await store.load_attachments(messages(session))
        elapsed = time.perf_counter() - start
        assert len(loaded) == 100
        await session.aclose()
    return elapsed


async def _requests(path: Path) -> tuple[float, float]:
    """Seconds the agent's attachment cache takes for a first and for a second request."""
    async with open_store(f"sqlite:///{path}") as store:
        session = await store.open("big")
        cache = AttachmentCache(session, store)
        history = messages(session)
        start = time.perf_counter()
        assert len(await cache.for_request(history)) == 100
        first = time.perf_counter() - start
        start = time.perf_counter()
        assert len(await cache.for_request(messages(session))) == 100
        later = time.perf_counter() - start
        await session.aclose()
    return first, later


def _measure(directory: Path, runs: int, turns: int) -> None:
    plain, pictured = directory / "plain.db", directory / "images.db"
    anyio.run(_build, plain, turns, 0)
    anyio.run(_build, pictured, turns, 100)
    times: dict[Path, list[float]] = {plain: [], pictured: []}
    peaks: dict[Path, list[float]] = {plain: [], pictured: []}
    for _ in range(runs):
        for path in (plain, pictured):  # alternating, so drift hits both alike
            times[path].append(anyio.run(_open, path) * 1000)
            peaks[path].append(anyio.run(_peak, path))
    events = turns * EVENTS_PER_TURN
    ratio = [a / b for a, b in zip(times[pictured], times[plain], strict=True)]
    memory = [a / b for a, b in zip(peaks[pictured], peaks[plain], strict=True)]
    size = pictured.stat().st_size / 2**20
    figures = (
        (f"open of a {events:,}-event session, no images", times[plain], "ms", ""),
        (
            f"  same, referencing 100 images of 200 KiB ({size:.0f} MiB file)",
            times[pictured],
            "ms",
            "",
        ),
        ("  open time with images / without", ratio, "×", "≤1.1×"),
        ("peak Python memory of open, no images", peaks[plain], "MiB", ""),
        ("  same, referencing 100 images", peaks[pictured], "MiB", ""),
        ("  peak memory with images / without", memory, "×", "≤1.1×"),
    )
    for name, values, unit, target in figures:
        print_figure(Figure(name, Stats(tuple(values)), unit, target))
    loads = [anyio.run(_load_all, pictured) * 1000 for _ in range(runs)]
    print_figure(Figure("  reading and checking all 100 attachments", Stats(tuple(loads)), "ms"))
    requests = [anyio.run(_requests, pictured) for _ in range(runs)]
    first = tuple(a * 1000 for a, _ in requests)
    later = tuple(b * 1000 for _, b in requests)
    print_figure(Figure("agent: attachments of the first request (reads 100)", Stats(first), "ms"))
    print_figure(Figure("  of a later request (the same 100, kept)", Stats(later), "ms"))


def main(quick: bool = False) -> None:
    runs = 3 if quick else 7
    with tempfile.TemporaryDirectory(prefix="eventlog-bench-") as name:
        _measure(Path(name), runs, 200 if quick else 1000)
    print(f"  (median of {runs} alternating runs; spread is min–max)", flush=True)
