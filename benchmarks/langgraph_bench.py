"""LangGraph: the same compiled graph on ``EventlogSaver`` and on ``langgraph-checkpoint-sqlite``.

Figures (issue 16, "Measure"): per-step checkpoint throughput (checkpoints per second of
``invoke``/``ainvoke`` wall time) and database bytes per checkpoint, for a thread of T = 10,
100 and 300 turns, in LangGraph's default ``durability="async"`` and in ``"sync"`` (each
checkpoint durable before the next step runs: what crash recovery needs). The savers:

- ``EventlogSaver`` on ``sqlite:///`` (``durability="power-loss"``: fsync per flush; every
  ``aput``/``aput_writes`` returns once flushed), driven by ``ainvoke``;
- ``SqliteSaver`` (WAL, SQLite's default ``synchronous=FULL``, a commit per call), driven by
  the sync ``invoke`` — it has no async methods;
- ``AsyncSqliteSaver`` (aiosqlite, same settings), driven by ``ainvoke``.

The graph, per turn: the user message; ``model`` returns an ``AIMessage`` with one tool call;
``tools`` (the prebuilt ``ToolNode``) runs it; ``model`` answers. Five checkpoints per turn (the
input, then one after each super-step: ``__start__``, ``model``, ``tools``, ``model``), each
super-step's tasks' writes before the checkpoint after it. The messages channel is
LangGraph's default ``add_messages``, so every checkpoint stores the whole history so far: bytes
per checkpoint grow with T for every saver (that is LangGraph's format, not the store's).
Runs alternate between savers, rotating the order; ratios are eventlog / SqliteSaver per run.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode

from agent.integrations.langgraph import EventlogSaver, langgraph_types
from eventlog import open_store

from ._harness import Figure, Stats, print_figure
from .peers._common import database_bytes

__all__ = ("main",)

FULL = ((10, 5), (100, 3), (300, 2))
QUICK = ((10, 2), (100, 1))
MODES = ("async", "sync")
_TEXT = "the quick brown fox jumps over the lazy dog; " * 3  # ~140 bytes per message


class _State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"{key}: {_TEXT}"


def _model(state: _State) -> dict[str, Any]:
    last = state["messages"][-1]
    turn = sum(isinstance(m, HumanMessage) for m in state["messages"])
    if isinstance(last, HumanMessage):
        call = {"name": "lookup", "args": {"key": f"k{turn}"}, "id": f"call-{turn}"}
        return {"messages": [AIMessage(content=_TEXT, id=f"ai-{turn}-1", tool_calls=[call])]}
    return {"messages": [AIMessage(content=_TEXT, id=f"ai-{turn}-2")]}


def _route(state: _State) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def _graph(saver: BaseCheckpointSaver[Any]) -> Any:
    graph = StateGraph(_State)
    graph.add_node("model", _model)
    graph.add_node("tools", ToolNode([lookup]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", _route, ["tools", END])
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=saver)


def _input(turn: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(content=_TEXT, id=f"user-{turn}")]}


_CONFIG: RunnableConfig = {"configurable": {"thread_id": "bench"}}
#: One run: (seconds, checkpoints, database bytes).
_Run = tuple[float, int, int]


async def _count(saver: BaseCheckpointSaver[Any]) -> int:
    return len([t async for t in saver.alist(_CONFIG)])


async def _run_async(saver: BaseCheckpointSaver[Any], turns: int, mode: str) -> tuple[float, int]:
    """The graph on an async saver for ``turns`` turns: seconds taken, checkpoints stored."""
    graph = _graph(saver)
    start = time.perf_counter()
    for turn in range(1, turns + 1):
        await graph.ainvoke(_input(turn), _CONFIG, durability=mode)
    seconds = time.perf_counter() - start
    return seconds, await _count(saver)


def _eventlog(path: Path, turns: int, mode: str) -> _Run:
    async def run() -> _Run:
        async with open_store(f"sqlite:///{path}", types=langgraph_types()) as store:
            async with EventlogSaver(store) as saver:
                seconds, checkpoints = await _run_async(saver, turns, mode)
        return seconds, checkpoints, database_bytes(path)

    return asyncio.run(run())


def _sqlite(path: Path, turns: int, mode: str) -> _Run:
    with SqliteSaver.from_conn_string(str(path)) as saver:
        graph = _graph(saver)
        start = time.perf_counter()
        for turn in range(1, turns + 1):
            graph.invoke(_input(turn), _CONFIG, durability=mode)
        seconds = time.perf_counter() - start
        checkpoints = len(list(saver.list(_CONFIG)))
    return seconds, checkpoints, database_bytes(path)


def _async_sqlite(path: Path, turns: int, mode: str) -> _Run:
    async def run() -> _Run:
        async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
            seconds, checkpoints = await _run_async(saver, turns, mode)
        return seconds, checkpoints, database_bytes(path)

    return asyncio.run(run())


SAVERS: dict[str, Callable[[Path, int, str], _Run]] = {
    "EventlogSaver": _eventlog,
    "SqliteSaver": _sqlite,
    "AsyncSqliteSaver": _async_sqlite,
}


def _measure(turns: int, runs: int, mode: str) -> dict[str, list[_Run]]:
    results: dict[str, list[_Run]] = {name: [] for name in SAVERS}
    names = list(SAVERS)
    for index in range(runs):
        order = names[index % len(names) :] + names[: index % len(names)]
        for name in order:
            with tempfile.TemporaryDirectory() as tmp:
                results[name].append(SAVERS[name](Path(tmp) / "lg.db", turns, mode))
    return results


def main(*, quick: bool = False) -> None:
    print(
        "(one thread; per turn the input checkpoint and four super-steps; "
        "throughput = checkpoints / invoke wall time; bytes = database file / checkpoints)"
    )
    for mode in MODES:
        for turns, runs in QUICK if quick else FULL:
            results = _measure(turns, runs, mode)
            for name, measured in results.items():
                rate = Stats(tuple(count / seconds for seconds, count, _ in measured))
                per = Stats(tuple(size / count for _, count, size in measured))
                label = f"{mode}, T={turns}, {name}"
                print_figure(Figure(f"{label}: throughput", rate, "checkpoints/s"))
                print_figure(Figure(f"{label}: size", per, "bytes/checkpoint"))
            pairs = list(zip(results["EventlogSaver"], results["SqliteSaver"], strict=True))
            speed = statistics.median((c1 / s1) / (c2 / s2) for (s1, c1, _), (s2, c2, _) in pairs)
            size = statistics.median((b1 / c1) / (b2 / c2) for (_, c1, b1), (_, c2, b2) in pairs)
            print(
                f"{mode}, T={turns}: EventlogSaver / SqliteSaver: throughput {speed:.2f}x, "
                f"bytes per checkpoint {size:.2f}x",
                flush=True,
            )


# -- resume: one long thread reopened (``python -m benchmarks langgraph-resume``) ----------------

#: Events in the thread (a checkpoint and a write per step) and runs of each.
RESUME_FULL = ((20_000, 3), (100_000, 2))
RESUME_QUICK = ((5_000, 1),)
#: Messages the state keeps (the graph trims its history, as an agent compacts): the state,
#: and so each checkpoint, stays bounded however long the thread grows.
_KEPT = 20


async def _write_thread(url: str, events: int) -> None:
    """A thread of ``events`` events as a trimming graph leaves it, driven through the saver's
    own ``aput_writes``/``aput``: per step the node's write of its message, then the checkpoint
    with the last ``_KEPT`` messages (the ``messages`` channel) and a step counter."""
    from langgraph.checkpoint.base import empty_checkpoint

    async with open_store(url, types=langgraph_types(), durability="process-crash") as store:
        async with EventlogSaver(store) as saver:
            config: RunnableConfig = {"configurable": {"thread_id": "long", "checkpoint_ns": ""}}
            history: list[AnyMessage] = []
            versions: dict[str, Any] = {}
            for step in range(events // 2):
                message = AIMessage(content=f"{_TEXT} {step}", id=f"m{step}")
                if "checkpoint_id" in config["configurable"]:
                    await saver.aput_writes(config, [("messages", [message])], f"task-{step}")
                history = [*history, message][-_KEPT:]
                bumped: dict[str, Any] = {
                    "messages": saver.get_next_version(versions.get("messages"), None)
                }
                if step % 50 == 0:  # a channel that changes rarely: its value lives far back
                    bumped["topic"] = saver.get_next_version(versions.get("topic"), None)
                versions.update(bumped)
                checkpoint = empty_checkpoint()
                checkpoint["channel_versions"] = dict(versions)
                checkpoint["channel_values"] = {"messages": history, "topic": f"topic {step}"}
                metadata: Any = {"source": "loop", "step": step}
                config = await saver.aput(config, checkpoint, metadata, bumped)


def _old_resume(url: str) -> Any:
    """What the saver did before: open with ``verify="full"`` and fold the whole log into an
    ``InMemorySaver`` (every value of every checkpoint), then read the latest checkpoint."""
    from langgraph.checkpoint.memory import InMemorySaver

    from agent.integrations.langgraph import Checkpointed, WritesPut, session_id_for

    async def run() -> Any:
        async with open_store(url, types=langgraph_types()) as store:
            session = await store.open(session_id_for("long"), verify="full")
            index = InMemorySaver()
            for event in await session.events():
                data = event.data
                if isinstance(data, Checkpointed):
                    for blob in data.blobs:
                        index.blobs[("long", data.ns, blob.channel, blob.version)] = (
                            blob.value.pair()
                        )
                    index.storage["long"][data.ns][data.id] = (
                        data.checkpoint.pair(),
                        data.metadata.pair(),
                        data.parent,
                    )
                elif isinstance(data, WritesPut):
                    stored = index.writes[("long", data.ns, data.checkpoint_id)]
                    for write in data.writes:
                        stored.setdefault(
                            (data.task_id, write.idx),
                            (data.task_id, write.channel, write.value.pair(), data.task_path),
                        )
            latest = index.get_tuple({"configurable": {"thread_id": "long"}})
            await session.aclose()
            return latest

    return asyncio.run(run())


def _new_resume(url: str) -> Any:
    """The saver now: the latest snapshot and the events after it, the index of seqs folded by
    streaming the log, the latest checkpoint's values read from the store."""

    async def run() -> Any:
        async with open_store(url, types=langgraph_types()) as store:
            async with EventlogSaver(store) as saver:
                return await saver.aget_tuple({"configurable": {"thread_id": "long"}})

    return asyncio.run(run())


def _traced(fn: Callable[[str], Any], url: str) -> tuple[float, int, Any]:
    """``fn(url)``'s wall time (untraced), then its peak traced memory (a second, traced run)
    and its answer."""
    import tracemalloc

    start = time.perf_counter()
    fn(url)
    seconds = time.perf_counter() - start
    tracemalloc.start()
    try:
        result = fn(url)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return seconds, peak, result


def resume(*, quick: bool = False) -> None:
    """Resume one long thread: open it and read its latest checkpoint (what ``ainvoke`` does
    first), before (``verify="full"`` and the whole index in memory) and now."""
    print(
        f"(one thread, a checkpoint and a write per step, the state trimmed to {_KEPT} messages; "
        "resume = open + aget_tuple of the latest; peak = tracemalloc, a separate run)"
    )
    for events, runs in RESUME_QUICK if quick else RESUME_FULL:
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{Path(tmp) / 'lg.db'}"
            asyncio.run(_write_thread(url, events))
            _old_resume(url), _new_resume(url)  # warm: imports, the page cache
            measured = {"before": [_traced(_old_resume, url) for _ in range(runs)]}
            measured["now"] = [_traced(_new_resume, url) for _ in range(runs)]
            assert measured["now"][0][2] == measured["before"][0][2]  # the same answer
        for name, results in measured.items():
            load = Stats(tuple(seconds * 1000 for seconds, _, _ in results))
            peak = Stats(tuple(peak / 2**20 for _, peak, _ in results))
            print_figure(Figure(f"{events} events, {name}: resume", load, "ms"))
            print_figure(Figure(f"{events} events, {name}: peak memory", peak, "MiB"))
