"""The first page of ``store.list`` as the store grows (issue 19): 100 sessions stored against
10,000, on any store URL; the ``sqlite`` and ``postgres`` suites run it.

Both stores are filled before the clock starts (``restore`` of one standard turn's rows per
session) and stay open side by side; each run times the page on one store, then the other, so
drift on the shared machine hits both alike, and the ratio is taken per run. A run's figure is
the median of :data:`CALLS` calls. The last page of the big store (after 9,900 sessions) is
printed too: a keyset page costs the same wherever it starts.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from typing import Any

from eventlog import open_store
from eventlog._codec import Row
from eventlog.stores import LogStore, SessionRecord

from ._harness import Figure, Stats, print_figure

__all__ = ("list_pages",)

SMALL, LARGE, PAGE = 100, 10_000, 100
#: Calls of ``list`` per run (their median is the run's figure).
CALLS = 20


def _id(n: int) -> str:
    return f"session-{n:06}"


async def _fill(store: LogStore, count: int, rows: Sequence[Row]) -> None:
    for n in range(count):
        await store.restore(SessionRecord(id=_id(n), created_at=1_700_000_000_000 + n), rows)


async def _page_ms(store: LogStore, after: str | None) -> float:
    times = []
    for _ in range(CALLS):
        start = time.perf_counter()
        page = await store.list(after=after, limit=PAGE)
        times.append(time.perf_counter() - start)
        assert len(page) == PAGE
    return statistics.median(times) * 1000


async def list_pages(urls: tuple[str, str], rows: Sequence[Row], runs: int, **options: Any) -> None:
    """Print the figures for the stores at ``urls`` (empty; filled with 100 and 10,000
    sessions of ``rows`` each)."""
    small, large, last = [], [], []
    async with AsyncExitStack() as stack:
        stores = [await stack.enter_async_context(open_store(u, **options)) for u in urls]
        await _fill(stores[0], SMALL, rows)
        await _fill(stores[1], LARGE, rows)
        for _ in range(runs):
            small.append(await _page_ms(stores[0], None))
            large.append(await _page_ms(stores[1], None))
            last.append(await _page_ms(stores[1], _id(LARGE - PAGE - 1)))
    name = f"list: first page of {PAGE} sessions"
    print_figure(Figure(f"{name}, {SMALL:,} stored", Stats(tuple(small)), "ms"))
    print_figure(Figure(f"{name}, {LARGE:,} stored", Stats(tuple(large)), "ms"))
    ratios = tuple(b / s for b, s in zip(large, small, strict=True))
    print_figure(
        Figure(f"  {LARGE:,} stored / {SMALL:,} stored (paired runs)", Stats(ratios), "×", "≈1×")
    )
    print_figure(
        Figure(
            f"  last page (after {LARGE - PAGE:,} sessions), {LARGE:,} stored",
            Stats(tuple(last)),
            "ms",
        )
    )
