"""The OpenAI Agents benchmark stores the same items in both sessions (no timings asserted)."""

from __future__ import annotations

from pathlib import Path

from benchmarks.openai_agents_bench import SESSIONS
from benchmarks.peers.openai_agents_peer import turn_items


def test_both_sessions_reload_every_item(tmp_path: Path) -> None:
    # Three turns on each: the same items go in, the same number comes back on reload.
    runs = {name: run(tmp_path / f"{name}.db", 3) for name, run in SESSIONS.items()}
    reloaded = {name: items for name, (_, _, items) in runs.items()}
    added = sum(len(turn_items(turn)) for turn in range(1, 4))
    assert reloaded == {"EventlogSession": added, "SQLiteSession": added}
