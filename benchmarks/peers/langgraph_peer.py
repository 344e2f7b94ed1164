"""LangGraph checkpointers: ``SqliteSaver`` and ``AsyncSqliteSaver`` on a file.

Equivalent of the workload: LangGraph persists an agent's history as checkpoints of the graph
state, whose ``messages`` channel (``add_messages``) holds the whole conversation as LangChain
messages (``HumanMessage``, ``AIMessage`` with ``tool_calls``, ``ToolMessage``). This peer
writes one checkpoint per step, holding every message so far — the user message and the step's
assistant message and tool result are added before the step's checkpoint — through the saver's
public ``put``/``aput`` with the parent pointer chained, exactly as the graph runtime calls it.
The graph runtime itself is not run, so this is a lower bound of what a LangGraph agent costs:
a real graph also writes an input checkpoint per invocation, a checkpoint per super-step (two
per step: model node, tool node) and each task's pending writes.

Storage grows with the square of the session length: every checkpoint re-serializes the whole
history (the default ``add_messages`` channel; LangGraph's ``DeltaChannel`` that avoids it is
beta and opt-in). Writing a session longer than :data:`MAX_WRITE_TURNS` turns would take
gigabytes, so the harness reports those lengths as not run (with the projected size) and
measures reload there on a database holding only the final checkpoint, which is all the load
path reads.

Durability: the saver enables WAL and leaves ``synchronous`` at SQLite's default, FULL on this
build (read back from the saver's own connection and reported); each ``put`` commits, so each
step's checkpoint is fsynced before the next step starts.

Load path: ``get_tuple``/``aget_tuple`` for the thread reads the latest checkpoint and
deserializes it (msgpack), rebuilding each message with its pydantic constructor (falling back
to an unvalidated ``model_construct`` when that fails). It validates message fields; it has no
integrity check.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from benchmarks.workload import turn_events

from ._common import DURABILITY_PRAGMAS, Stopwatch, Timing, WriteResult, durability_settings

__all__ = ("MAX_WRITE_TURNS", "LangGraphAsync", "LangGraphSync", "step_messages")

#: The longest session written for real; beyond it the quadratic storage costs gigabytes.
MAX_WRITE_TURNS = 100
_THREAD = "lg-thread"


def step_messages(turn: int) -> list[list[BaseMessage]]:
    """The LangChain messages each step of ``turn`` adds to the state, one list per step."""
    steps: list[list[BaseMessage]] = []
    pending: list[BaseMessage] = []
    for type_, data, _surface in turn_events(turn):
        if type_ == "user/message":
            pending.append(HumanMessage(content=data.message.text, id=data.message.id))
        elif type_ == "assistant/message":
            message = data.message
            calls = [
                {"name": c.name, "args": json.loads(c.arguments), "id": c.id, "type": "tool_call"}
                for c in message.tool_calls
            ]
            pending.append(AIMessage(content=message.text, id=message.id, tool_calls=calls))
        elif type_ == "tool/result":
            part = data.message.tool_results[0]
            pending.append(
                ToolMessage(content=part.text, tool_call_id=part.call_id, id=data.message.id)
            )
        elif type_ == "step/end":
            steps.append(pending)
            pending = []
    return steps


class _Checkpoints:
    """Builds the chain of checkpoints of one thread, one per step."""

    def __init__(self) -> None:
        self.messages: list[BaseMessage] = []
        self.version = 0
        self.config: RunnableConfig = {"configurable": {"thread_id": _THREAD, "checkpoint_ns": ""}}

    def next(self, added: list[BaseMessage]) -> tuple[RunnableConfig, Any, Any, Any]:
        """Arguments of the ``put`` that records ``added``."""
        self.messages.extend(added)
        self.version += 1
        state = empty_checkpoint()
        state["channel_values"] = {"messages": list(self.messages)}
        state["channel_versions"] = {"messages": self.version}
        checkpoint = create_checkpoint(state, None, self.version)
        metadata = {"source": "loop", "step": self.version, "parents": {}}
        return self.config, checkpoint, metadata, {"messages": self.version}


def _all_messages(turns: int) -> list[BaseMessage]:
    return [m for turn in range(1, turns + 1) for step in step_messages(turn) for m in step]


class _Checkpointer:
    """What the sync and async savers share: package, what loading validates, seed, budget."""

    package = "langgraph-checkpoint-sqlite"
    validates = "message fields (pydantic, falls back to unvalidated)"
    validating = True
    concurrent_note = "not run (storage grows as T² per session)"

    def seed(self, path: Path, turns: int) -> str:
        """Write only the final checkpoint of a ``turns``-turn session (what reload reads)."""
        with SqliteSaver.from_conn_string(str(path)) as saver:
            saver.put(*_Checkpoints().next(_all_messages(turns)))
        return _THREAD

    def max_turns(self) -> int | None:
        return MAX_WRITE_TURNS


class LangGraphSync(_Checkpointer):
    """``SqliteSaver`` on a file, one checkpoint per step holding all messages."""

    name = "langgraph SqliteSaver"
    durability = "WAL (library), synchronous=FULL (SQLite default), one put per step"

    def write(self, path: Path, turns: int) -> WriteResult:
        with SqliteSaver.from_conn_string(str(path)) as saver:
            saver.setup()
            chain = _Checkpoints()
            with Stopwatch() as watch:
                for turn in range(1, turns + 1):
                    for added in step_messages(turn):
                        chain.config = saver.put(*chain.next(added))
            settings = durability_settings(saver.conn)
        return WriteResult(watch.timing, _THREAD, settings)

    def reload(self, path: Path, session_id: str) -> Timing:
        with SqliteSaver.from_conn_string(str(path)) as saver:
            config: RunnableConfig = {"configurable": {"thread_id": session_id}}
            with Stopwatch() as watch:
                loaded = saver.get_tuple(config)
        assert loaded is not None and loaded.checkpoint["channel_values"]["messages"]
        return watch.timing


class LangGraphAsync(_Checkpointer):
    """``AsyncSqliteSaver`` (aiosqlite) on a file, one checkpoint per step."""

    name = "langgraph AsyncSqliteSaver"
    durability = "WAL (library), synchronous=FULL (SQLite default), one aput per step"

    def write(self, path: Path, turns: int) -> WriteResult:
        return asyncio.run(self._write(path, turns))

    async def _write(self, path: Path, turns: int) -> WriteResult:
        async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
            await saver.setup()
            chain = _Checkpoints()
            with Stopwatch() as watch:
                for turn in range(1, turns + 1):
                    for added in step_messages(turn):
                        chain.config = await saver.aput(*chain.next(added))
            settings = {}
            for name in DURABILITY_PRAGMAS:
                async with saver.conn.execute(f"PRAGMA {name}") as cursor:
                    row = await cursor.fetchone()
                settings[name] = str(row[0]) if row is not None else "?"
        return WriteResult(watch.timing, _THREAD, settings)

    def reload(self, path: Path, session_id: str) -> Timing:
        return asyncio.run(self._reload(path, session_id))

    async def _reload(self, path: Path, session_id: str) -> Timing:
        async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
            config: RunnableConfig = {"configurable": {"thread_id": session_id}}
            with Stopwatch() as watch:
                loaded = await saver.aget_tuple(config)
        assert loaded is not None and loaded.checkpoint["channel_values"]["messages"]
        return watch.timing
