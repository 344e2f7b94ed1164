"""What ``EventlogSaver`` stores is what the graph handed it at the moment of the call.

LangGraph's ``durability="async"`` and ``"exit"`` hand the saver a checkpoint and go on running:
the objects it passed may change before the saver's coroutine is scheduled. ``aput`` and
``aput_writes`` serialize their arguments when called, before anything yields, and the sync
``put``/``put_writes`` on the caller's thread before it waits for the loop; the scenarios below
mutate every object handed over after the call and read back what was handed over. A real graph
then runs in every durability mode and ends in the same state.
"""

from __future__ import annotations

import operator
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

import anyio
import anyio.to_thread
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, empty_checkpoint
from langgraph.graph import END, START, StateGraph

from agent.integrations.langgraph import EventlogSaver, langgraph_types
from eventlog import open_store

CONFIG: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


def _checkpoint(log: list[str]) -> Checkpoint:
    checkpoint = empty_checkpoint()
    checkpoint["id"] = "1ef-0001"
    checkpoint["channel_values"] = {"log": log}
    checkpoint["channel_versions"] = {"log": 2}
    return checkpoint


@pytest.mark.anyio
async def test_a_put_stores_the_state_as_it_was_when_called(tmp_path: Path) -> None:
    async with EventlogSaver.from_conn_string(f"sqlite:///{tmp_path / 's.db'}") as saver:
        log = ["handed over"]
        checkpoint = _checkpoint(log)
        metadata: dict[str, Any] = {"step": 1, "source": "loop"}
        pending = saver.aput(CONFIG, checkpoint, metadata, {"log": 2})  # type: ignore[arg-type]
        # The graph goes on before the saver's coroutine runs: every object changes.
        log.append("a later step")
        checkpoint["channel_values"]["log"] = ["replaced"]
        metadata["step"] = 99
        stored = await pending

        value = ["write handed over"]
        writing = saver.aput_writes(stored, [("log", value)], "task-1")
        value.append("a later step")
        await writing

        found = await saver.aget_tuple(CONFIG)
        assert found is not None
        assert found.checkpoint["channel_values"] == {"log": ["handed over"]}
        assert found.metadata["step"] == 1
        assert found.pending_writes == [("task-1", "log", ["write handed over"])]


@pytest.mark.anyio
async def test_a_sync_put_stores_the_state_as_it_was_when_called(tmp_path: Path) -> None:
    async with EventlogSaver.from_conn_string(f"sqlite:///{tmp_path / 's.db'}") as saver:
        log = ["handed over"]
        checkpoint = _checkpoint(log)
        # The caller's thread serializes before it waits for the loop; the loop is busy
        # until after the mutation, so a put that serialized on the loop would see it.
        started = anyio.Event()

        def put() -> None:
            anyio.from_thread.run_sync(started.set)
            saver.put(CONFIG, checkpoint, {"step": 1}, {"log": 2})

        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, put)
            await started.wait()
            time.sleep(0.2)  # blocks the loop: the put serializes, then waits for it
            log.append("a later step")
        found = await saver.aget_tuple(CONFIG)
        assert found is not None and found.checkpoint["channel_values"] == {"log": ["handed over"]}


class _State(TypedDict):
    log: Annotated[list[str], operator.add]


def _graph(saver: EventlogSaver) -> Any:
    builder = StateGraph(_State)
    for name, after in (("a", START), ("b", "a"), ("c", "b")):
        builder.add_node(name, lambda state, name=name: {"log": [f"{name}{len(state['log'])}"]})
        builder.add_edge(after, name)
    builder.add_edge("c", END)
    return builder.compile(checkpointer=saver)


@pytest.mark.anyio
@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
async def test_a_graph_ends_in_the_same_state_in_every_durability_mode(
    tmp_path: Path, durability: Any
) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    async with EventlogSaver.from_conn_string(url) as saver:
        await _graph(saver).ainvoke({"log": ["in"]}, CONFIG, durability=durability)
    # Reopened in a fresh saver: the stored thread holds the run's whole state.
    async with open_store(url, types=langgraph_types()) as store:
        async with EventlogSaver(store) as saver:
            state = await _graph(saver).aget_state(CONFIG)
            history = [s async for s in _graph(saver).aget_state_history(CONFIG)]
    assert state.values == {"log": ["in", "a1", "b2", "c3"]}
    assert state.next == ()
    # "exit" stores the last checkpoint only; the others store one per step.
    assert len(history) == (1 if durability == "exit" else 5)


def test_a_sync_saver_runs_graph_invoke_without_a_loop_of_the_callers(tmp_path: Path) -> None:
    # As with LangGraph's SqliteSaver: plain synchronous code, no event loop of its own.
    url = f"sqlite:///{tmp_path / 's.db'}"
    with EventlogSaver.sync_from_conn_string(url) as saver:
        out = _graph(saver).invoke({"log": ["in"]}, CONFIG)
        assert out == {"log": ["in", "a1", "b2", "c3"]}
    with EventlogSaver.sync_from_conn_string(url) as saver:
        assert _graph(saver).get_state(CONFIG).values == out
