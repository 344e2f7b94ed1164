"""The LangGraph benchmark runs the same graph on every saver (no timings asserted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.langgraph_bench import SAVERS


@pytest.mark.parametrize("mode", ["async", "sync"])
def test_every_saver_stores_the_same_checkpoints(mode: str, tmp_path: Path) -> None:
    # Three turns on each saver: the same graph makes the same number of checkpoints,
    # and every database holds them.
    runs = {name: run(tmp_path / f"{name}.db", 3, mode) for name, run in SAVERS.items()}
    counts = {name: checkpoints for name, (_, checkpoints, _) in runs.items()}
    # A turn: the input checkpoint, then one per super-step (__start__, model, tools, model).
    assert set(counts.values()) == {3 * 5}
    assert all(size > 0 for _, _, size in runs.values())
