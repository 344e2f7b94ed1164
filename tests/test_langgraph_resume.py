"""A long LangGraph thread resumes from its snapshot: the saver's session holds only the events
after it, and every read answers exactly what a ``verify="full"`` open of the whole log gives."""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from agent.integrations.langgraph import (
    Checkpointed,
    EventlogSaver,
    WritesPut,
    langgraph_types,
    session_id_for,
)
from eventlog import open_store

pytestmark = pytest.mark.anyio

TURNS = 40
_THREAD: RunnableConfig = {"configurable": {"thread_id": "long"}}


class _State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    # Written by the first turn only: its one value lives in the thread's oldest events.
    topic: str
    steps: Annotated[int, operator.add]


def _model(state: _State) -> dict[str, Any]:
    turn = len(state["messages"])
    update: dict[str, Any] = {"messages": [AIMessage(content=f"reply {turn}", id=f"ai-{turn}")]}
    if "topic" not in state:
        update["topic"] = "the topic set once"
    update["steps"] = 1
    return update


def _graph(saver: EventlogSaver) -> Any:
    graph = StateGraph(_State)
    graph.add_node("model", _model)
    graph.add_edge(START, "model")
    graph.add_edge("model", END)
    return graph.compile(checkpointer=saver)


async def _reference(url: str) -> InMemorySaver:
    """The saver's index as the whole log gives it: every event of a ``verify="full"`` open
    folded into an ``InMemorySaver``'s dicts (what the saver held before it read on demand)."""
    reference = InMemorySaver()
    async with open_store(url, types=langgraph_types()) as store:
        session = await store.open(session_id_for("long"), verify="full", wait=0)
        for event in await session.events():
            data = event.data
            if isinstance(data, Checkpointed):
                for blob in data.blobs:
                    key = ("long", data.ns, blob.channel, blob.version)
                    reference.blobs[key] = blob.value.pair()
                reference.storage["long"][data.ns][data.id] = (
                    data.checkpoint.pair(),
                    data.metadata.pair(),
                    data.parent,
                )
            elif isinstance(data, WritesPut):
                stored = reference.writes[("long", data.ns, data.checkpoint_id)]
                for write in data.writes:
                    if write.idx < 0 or (data.task_id, write.idx) not in stored:
                        stored[(data.task_id, write.idx)] = (
                            data.task_id,
                            write.channel,
                            write.value.pair(),
                            data.task_path,
                        )
        await session.aclose()
    return reference


async def test_a_long_thread_resumes_from_its_snapshot_with_the_full_answers(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/lg.db"
    options: dict[str, Any] = {"snapshot_every": 16, "trim_every": 16}
    # A thread of many turns on a store that snapshots (and trims) every 16 events.
    async with open_store(url, types=langgraph_types(), **options) as store:
        async with EventlogSaver(store) as saver:
            graph = _graph(saver)
            for turn in range(TURNS):
                await graph.ainvoke(
                    {"messages": [HumanMessage(f"q{turn}", id=f"u{turn}")]}, _THREAD
                )
            live = saver._threads["long"].session
            assert live.loaded_from > 0  # the live session trimmed its old events too
    expected = await _reference(url)

    # A new process resumes the thread: the session opens from its snapshot ...
    async with open_store(url, types=langgraph_types(), **options) as store:
        async with EventlogSaver(store) as saver:
            latest = await saver.aget_tuple(_THREAD)
            session = saver._threads["long"].session
            assert session.snapshot_seq is not None and session.loaded_from > 0
            assert len(await session.events(session.loaded_from)) < 16 < session.head
            # ... and the latest checkpoint is the one the whole log gives, with the value
            # written only by the first turn, read back from the store.
            assert latest == expected.get_tuple(_THREAD)
            assert latest is not None and latest.checkpoint["channel_values"]["topic"]
            # Every listing LangGraph can ask for, newest first.
            everything = [t async for t in saver.alist(_THREAD)]
            assert everything == list(expected.list(_THREAD))
            assert len(everything) > TURNS
            middle = everything[len(everything) // 2].config
            for kwargs in (
                {"limit": 3},
                {"before": middle, "limit": 5},
                {"before": middle},
                {"filter": {"source": "input"}, "limit": 4},
                {"filter": {"step": 1}},
            ):
                got = [t async for t in saver.alist(_THREAD, **kwargs)]
                assert got == list(expected.list(_THREAD, **kwargs)), kwargs
            assert [t async for t in saver.alist(None, limit=2)] == list(
                expected.list(None, limit=2)
            )
            # An old checkpoint by id (time travel), and the delta history of its channels.
            oldest = everything[-2].config
            assert await saver.aget_tuple(oldest) == expected.get_tuple(oldest)
            channels = ["messages", "topic", "steps"]
            assert await saver.aget_delta_channel_history(
                config=middle, channels=channels
            ) == expected.get_delta_channel_history(config=middle, channels=channels)
            # The graph goes on from where it stopped.
            state = await _graph(saver).ainvoke(
                {"messages": [HumanMessage("more", id="m")]}, _THREAD
            )
            assert len(state["messages"]) == 2 * TURNS + 2
            assert state["steps"] == TURNS + 1


async def test_a_thread_copied_from_a_resumed_thread_has_every_checkpoint(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/lg.db"
    options: dict[str, Any] = {"snapshot_every": 8, "trim_every": 8}
    async with open_store(url, types=langgraph_types(), **options) as store:
        async with EventlogSaver(store) as saver:
            graph = _graph(saver)
            for turn in range(10):
                await graph.ainvoke(
                    {"messages": [HumanMessage(f"q{turn}", id=f"u{turn}")]}, _THREAD
                )
    async with open_store(url, types=langgraph_types(), **options) as store:
        async with EventlogSaver(store) as saver:
            # The copy streams the source's log, most of it from the store.
            await saver.acopy_thread("long", "copy")
            assert saver._threads["long"].session.loaded_from > 0
            source = [t.checkpoint async for t in saver.alist(_THREAD)]
            copy_config: RunnableConfig = {"configurable": {"thread_id": "copy"}}
            copied = [t.checkpoint async for t in saver.alist(copy_config)]
    assert copied == source and len(source) > 20
