"""The LangGraph benchmark runs the same graph on every saver (no timings asserted)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from benchmarks.langgraph_bench import SAVERS, _new_resume, _old_resume, _write_thread


@pytest.mark.parametrize("mode", ["async", "sync"])
def test_every_saver_stores_the_same_checkpoints(mode: str, tmp_path: Path) -> None:
    # Three turns on each saver: the same graph makes the same number of checkpoints,
    # and every database holds them.
    runs = {name: run(tmp_path / f"{name}.db", 3, mode) for name, run in SAVERS.items()}
    counts = {name: checkpoints for name, (_, checkpoints, _) in runs.items()}
    # A turn: the input checkpoint, then one per super-step (__start__, model, tools, model).
    assert set(counts.values()) == {3 * 5}
    assert all(size > 0 for _, _, size in runs.values())


def test_the_resume_mode_reads_the_same_checkpoint_before_and_now(tmp_path: Path) -> None:
    # A thread past its first snapshot: both resumes give the same latest checkpoint.
    url = f"sqlite:///{tmp_path / 'lg.db'}"
    anyio.run(_write_thread, url, 4_200)
    before = _old_resume(url)
    assert _new_resume(url) == before and before is not None
