"""The OpenAI Agents benchmark stores the same items in both sessions (no timings asserted)."""

from __future__ import annotations

from pathlib import Path

import anyio

from benchmarks.openai_agents_bench import SESSIONS, _resume, _write_session
from benchmarks.peers.openai_agents_peer import turn_items


def test_both_sessions_reload_every_item(tmp_path: Path) -> None:
    # Three turns on each: the same items go in, the same number comes back on reload.
    runs = {name: run(tmp_path / f"{name}.db", 3) for name, run in SESSIONS.items()}
    reloaded = {name: items for name, (_, _, items) in runs.items()}
    added = sum(len(turn_items(turn)) for turn in range(1, 4))
    assert reloaded == {"EventlogSession": added, "SQLiteSession": added}


def test_the_resume_mode_reads_the_same_items_before_and_now(tmp_path: Path) -> None:
    # A session long enough to compact and snapshot: both resumes give the same items.
    url = f"sqlite:///{tmp_path / 'oa.db'}"
    anyio.run(_write_session, url, 600)
    for limit in (None, 50):
        before = _resume(url, full=True, limit=limit)
        assert _resume(url, full=False, limit=limit) == before and before
