"""Measuring helpers: repeat a measurement, report median and spread."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ("Figure", "Stats", "print_figure", "repeat", "timed")


@dataclass(frozen=True)
class Stats:
    """Several runs of one measurement."""

    values: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)

    def spread(self) -> str:
        return f"{self.low:,.4g}–{self.high:,.4g}"


@dataclass(frozen=True)
class Figure:
    """One printed figure: a name, its runs, the unit, and optionally a target to reach."""

    name: str
    stats: Stats
    unit: str
    target: str = ""


def repeat(measure: Callable[[], float], runs: int = 5) -> Stats:
    """Run ``measure`` ``runs`` times (it returns one value per run)."""
    return Stats(tuple(measure() for _ in range(runs)))


def timed(fn: Callable[[], object]) -> float:
    """Seconds one call of ``fn`` takes."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def print_figure(figure: Figure) -> None:
    """One line: name, median, spread (min–max over the runs), runs, target."""
    stats = figure.stats
    target = f"   [{figure.target}]" if figure.target else ""
    print(
        f"{figure.name:<58} {stats.median:>14,.4g} {figure.unit:<10} "
        f"(min–max {stats.spread()}, {len(stats.values)} runs){target}",
        flush=True,
    )
