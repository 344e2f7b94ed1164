"""LangGraph: one thread of 1,000 steps on SQLite, ``EventlogSaver`` against ``AsyncSqliteSaver``.

Figures (issue 30, "Measure"): step throughput (checkpoints per second of ``ainvoke`` wall
time, LangGraph's default ``durability="async"``), the resume time of the thread (a fresh saver
on the file, the thread's state read: what ``ainvoke(None, cfg)`` starts with) and the database
bytes. The graph is ``langgraph_bench``'s (model, prebuilt ``ToolNode``, model: five checkpoints a
turn, the whole ``add_messages`` history in each); 200 turns make 1,000 checkpoints. Three
savers, one run each, in rotating order:

- ``AsyncSqliteSaver`` (aiosqlite, WAL, ``synchronous=FULL``);
- ``EventlogSaver`` (``sqlite:///``, fsync per flush) with the prebuilt ``ToolNode``;
- ``EventlogSaver`` with ``DurableToolNode`` (each tool call journalled: two more flushes a
  call, and the turn/step events ``eventlog audit`` reads).

Run: ``python -m benchmarks langgraph-steps`` or ``python -m benchmarks.langgraph_steps [TURNS]``.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph

from agent.integrations.langgraph import DurableToolNode, EventlogSaver

from .langgraph_bench import _CONFIG, _count, _graph, _input, _model, _route, _State, lookup
from .peers._common import database_bytes

__all__ = ("main",)


def _durable_graph(saver: EventlogSaver) -> Any:
    graph = StateGraph(_State)
    graph.add_node("model", _model)
    graph.add_node("tools", DurableToolNode([lookup], saver))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", _route, ["tools", END])
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=saver)


async def _drive(graph: Any, turns: int) -> float:
    start = time.perf_counter()
    for turn in range(1, turns + 1):
        await graph.ainvoke(_input(turn), _CONFIG)  # LangGraph's default durability
    return time.perf_counter() - start


async def _resume(saver: BaseCheckpointSaver[Any]) -> tuple[float, int]:
    start = time.perf_counter()
    state = await _graph(saver).aget_state(_CONFIG)
    return time.perf_counter() - start, len(state.values["messages"])


async def _eventlog(path: Path, turns: int, durable: bool) -> dict[str, float]:
    url = f"sqlite:///{path}"
    async with EventlogSaver.from_conn_string(url) as saver:
        graph = _durable_graph(saver) if durable else _graph(saver)
        seconds = await _drive(graph, turns)
        checkpoints = await _count(saver)
    start = time.perf_counter()
    async with EventlogSaver.from_conn_string(url) as saver:
        opened = time.perf_counter() - start
        read, messages = await _resume(saver)
    return _figures(seconds, checkpoints, opened + read, messages, path)


async def _async_sqlite(path: Path, turns: int) -> dict[str, float]:
    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
        seconds = await _drive(_graph(saver), turns)
        checkpoints = await _count(saver)
    start = time.perf_counter()
    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
        opened = time.perf_counter() - start
        read, messages = await _resume(saver)
    return _figures(seconds, checkpoints, opened + read, messages, path)


def _figures(
    seconds: float, checkpoints: int, resume: float, messages: int, path: Path
) -> dict[str, float]:
    return {
        "checkpoints": checkpoints,
        "steps/s": checkpoints / seconds,
        "resume s": resume,
        "messages": messages,
        "MB": database_bytes(path) / 1e6,
    }


def main(*, quick: bool = False, turns: int | None = None) -> None:
    turns = turns or (20 if quick else 200)
    runs: dict[str, Callable[[Path], Awaitable[dict[str, float]]]] = {
        "AsyncSqliteSaver": lambda p: _async_sqlite(p, turns),
        "EventlogSaver + ToolNode": lambda p: _eventlog(p, turns, durable=False),
        "EventlogSaver + DurableToolNode": lambda p: _eventlog(p, turns, durable=True),
    }
    for name, run in runs.items():
        with tempfile.TemporaryDirectory() as tmp:
            found: dict[str, float] = asyncio.run(run(Path(tmp) / "lg.db"))  # type: ignore[arg-type]
        shown = ", ".join(
            f"{k} {v:,.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in found.items()
        )
        print(f"{name}: {shown}", flush=True)


if __name__ == "__main__":
    main(turns=int(sys.argv[1]) if len(sys.argv) > 1 else None)
