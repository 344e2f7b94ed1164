"""The pydantic-ai benchmark does the same work in each variant (no timings asserted)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic_ai.messages import ModelMessagesTypeAdapter

from agent.integrations.pydantic_ai import EventlogHistory, pydantic_ai_types
from benchmarks.pydantic_ai_bench import VARIANTS
from eventlog import open_store


async def _stored(path: Path) -> tuple[int, int]:
    """Messages in the benchmark's history, and its tool/call events."""
    async with open_store(f"sqlite:///{path / 'h.db'}", types=pydantic_ai_types()) as store:
        history = await EventlogHistory.open(store, "bench")
        calls = sum(1 for e in history.log.window() if e.type == "tool/call")
        await history.log.aclose()
    return len(history.messages()), calls


def test_every_variant_keeps_the_whole_conversation(tmp_path: Path) -> None:
    # Three runs of four messages each in every variant that persists.
    for name, variant in VARIANTS.items():
        (tmp_path / name).mkdir()
        wall, cpu = asyncio.run(variant(tmp_path / name, 3))
        assert wall > 0 and cpu > 0
    saved = (tmp_path / "json file" / "history.json").read_bytes()
    assert len(ModelMessagesTypeAdapter.validate_json(saved)) == 12
    assert asyncio.run(_stored(tmp_path / "EventlogHistory")) == (12, 0)
    assert asyncio.run(_stored(tmp_path / "EventlogHistory + DurableToolset")) == (12, 3)
