"""A long, compacted ``EventlogSession`` resumes from its snapshot: the log holds only the events
after it, and every item the SDK asks for is what a ``verify="full"`` open of the whole log
gives; a crash-interrupted run is still repaired on open."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agent import compact
from agent.integrations.openai_agents import EventlogSession, openai_agents_types
from eventlog import Message, ToolCall, open_store
from recovery import outcome_unknown_text, scan

pytestmark = pytest.mark.anyio

#: A snapshot (and a trim of what it covers) at nearly every flush once the log is compacted.
OPTIONS: dict[str, Any] = {"snapshot_every": 8, "trim_every": 8}
LIMITS = (1, 2, 3, 7, 20, 60, 10_000)


def _turn(number: int) -> list[dict[str, Any]]:
    """One turn as the Runner adds it: the input, a reply with a call, its output, a reply;
    plus an item with no core equivalent."""
    call = f"c{number}"
    return [
        {"role": "user", "content": f"question {number}"},
        {"type": "function_call", "call_id": call, "name": "look", "arguments": "{}"},
        {"type": "function_call_output", "call_id": call, "output": f"found {number}"},
        {"type": "reasoning", "id": f"rs_{number}", "summary": []},
        {
            "id": f"msg_{number}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": f"answer {number}", "annotations": []}],
        },
    ]


async def _summarize(shadowed: Sequence[Message]) -> str:
    return f"{len(shadowed)} messages"


async def _write(url: str, turns: int) -> None:
    """``turns`` turns, a pop and a clear along the way, compacted every five turns."""
    async with open_store(url, types=openai_agents_types(), **OPTIONS) as store:
        session = await EventlogSession.open(store, "s")
        for number in range(turns):
            await session.add_items(_turn(number))
            if number == 7:
                await session.pop_item()
            if number == 12:
                await session.clear_session()
            if number % 5 == 4:
                session.end_turn()
                nodes = session.log.surface_index.nodes
                await compact(session.log, nodes[0], nodes[-5], _summarize)
                await session.log.flush()
        await session.add_items(_turn(turns))
        await session.log.aclose()


async def _expected(url: str, limits: Sequence[int] = LIMITS) -> dict[int | None, list[Any]]:
    """Every answer of ``get_items`` from the whole log (a ``verify="full"`` open)."""
    async with open_store(url, types=openai_agents_types()) as store:
        log = await store.open("s", verify="full")
        full = EventlogSession(log)
        answers: dict[int | None, list[Any]] = {k: await full.get_items(k) for k in limits}
        answers[None] = await full.get_items()
        await log.aclose()
    return answers


async def test_a_compacted_session_resumes_from_its_snapshot_with_the_same_items(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'e.db'}"
    await _write(url, turns=30)
    expected = await _expected(url)
    assert len(expected[None]) > 60  # the clear emptied the list once; it grew again

    async with open_store(url, types=openai_agents_types(), **OPTIONS) as store:
        # Each open starts from the snapshot: the events before it are not in memory.
        for limit in LIMITS:
            session = await EventlogSession.open(store, "s")
            assert session.log.snapshot_seq is not None and session.log.loaded_from > 0
            # The latest items come from a window at the end of the log ...
            assert await session.get_items(limit) == expected[limit], limit
            await session.log.aclose()
        session = await EventlogSession.open(store, "s")
        assert session.log.loaded_from > 0
        # ... the whole list from a fold that streams the older events from the store.
        assert await session.get_items() == expected[None]
        assert await session.get_items(3) == expected[3]
        # pop_item takes the latest item; the list then goes on as the full fold says.
        assert await session.pop_item() == expected[None][-1]
        assert await session.get_items() == expected[None][:-1]
        await session.log.aclose()


async def test_the_latest_items_are_right_wherever_the_window_starts(tmp_path: Path) -> None:
    # Every reply is spelled (its SDK id differs from the core conversion's) in the event
    # after it. The log then grows one event at a time, so the window get_items(limit) reads
    # from the head starts, in turn, at every position of a turn: also between a reply and its
    # spelling, and between a pop and the item it took.
    url = f"sqlite:///{tmp_path / 'e.db'}"
    await _write(url, turns=12)
    for extra in range(16):
        async with open_store(url, types=openai_agents_types(), **OPTIONS) as store:
            session = await EventlogSession.open(store, "s")
            await session.add_items([{"type": "reasoning", "id": f"x{extra}", "summary": []}])
            await session.log.aclose()
        expected = await _expected(url, limits=(1, 2, 5))
        async with open_store(url, types=openai_agents_types(), **OPTIONS) as store:
            for limit in (1, 2, 5):
                session = await EventlogSession.open(store, "s")
                assert session.log.loaded_from > 0
                assert await session.get_items(limit) == expected[limit], (extra, limit)
                await session.log.aclose()


async def test_a_crash_after_a_tool_started_is_repaired_from_a_snapshot_open(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'e.db'}"
    await _write(url, turns=10)
    call = {"type": "function_call", "call_id": "c-crash", "name": "deploy", "arguments": "{}"}
    async with open_store(url, types=openai_agents_types(), **OPTIONS) as store:
        session = await EventlogSession.open(store, "s")
        await session.add_items([{"role": "user", "content": "deploy it"}])
        # The hooks log the reply and the tool call, then the process dies mid-tool, after
        # enough flushed events that a snapshot is taken inside the open step.
        proposed = session.log_model_output([call])
        assert proposed is not None
        step = session.step()
        assert step is not None
        call_event = ToolCall(
            turn=step[0], step=step[1], call_id="c-crash", name="deploy", arguments="{}"
        )
        session.log.append("tool/call", call_event)
        await session.add_items(
            [{"type": "reasoning", "id": f"r{i}", "summary": []} for i in range(20)]
        )
        await session.log.flush()
        assert session.log.loaded_from > proposed  # the proposal is only in the store now
        await session.log.aclose()
    async with open_store(url, types=openai_agents_types(), **OPTIONS) as store:
        again = await EventlogSession.open(store, "s")
        assert again.log.snapshot_seq is not None and again.log.loaded_from > proposed
        # The timeline the snapshot restored still knew the call: it is answered, unknown.
        items = await again.get_items()
        assert items[-1] == {
            "type": "function_call_output",
            "call_id": "c-crash",
            "output": outcome_unknown_text("deploy", "c-crash"),
        }
        assert not scan(again.log).needs_repair
        await again.log.aclose()


async def test_a_reply_the_sdk_never_added_is_found_from_a_snapshot_open(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'e.db'}"
    await _write(url, turns=10)
    call = {"type": "function_call", "call_id": "c-lost", "name": "deploy", "arguments": "{}"}
    async with open_store(url, types=openai_agents_types(), **OPTIONS) as store:
        session = await EventlogSession.open(store, "s")
        await session.add_items([{"role": "user", "content": "deploy it"}])
        proposed = session.log_model_output([call])
        assert proposed is not None
        # Items with no core equivalent after the reply, flushed: a snapshot lands past it.
        await session.add_items(
            [{"type": "reasoning", "id": f"r{i}", "summary": []} for i in range(20)]
        )
        assert session.log.loaded_from > proposed
        await session.log.aclose()
    async with open_store(url, types=openai_agents_types(), **OPTIONS) as store:
        again = await EventlogSession.open(store, "s")
        assert again.log.loaded_from > proposed
        items = await again.get_items(1)
        assert items[0]["call_id"] == "c-lost" and "never started" in items[0]["output"]
        assert not scan(again.log).needs_repair
        await again.log.aclose()
