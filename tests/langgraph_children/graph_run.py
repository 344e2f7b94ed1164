"""Crash-test children: a real LangGraph ``StateGraph`` with a tool node on ``EventlogSaver``.

A *zygote* (``python -m tests.langgraph_children.graph_run``) imports LangGraph once, then forks
one child per command it reads on stdin and answers ``exit STATUS`` when the child is gone::

    run DB PROGRESS KILL_AT DURABILITY
                                run the graph (LangGraph's ``durability``: sync, async) on a
                                fresh thread; SIGKILL at boundary KILL_AT (0: never)
    check DB PROGRESS REPORT    reopen what a killed run left, write REPORT (JSON)

*Boundaries* are the two sides of every saver call: boundary 2i-1 is the start of the i-th
``aput``/``aput_writes`` (nothing of it committed), 2i its return (its event flushed). A run
child writes ``returned put CHECKPOINT`` / ``returned writes CHECKPOINT TASK`` to PROGRESS
when a call returns, one ``os.write`` on an ``O_APPEND`` descriptor, before the boundary's kill
check: what it names was durable when the process died.

The graph: ``model`` (scripted: two tool calls per round for three rounds, then an answer)
fans out to the prebuilt ``ToolNode`` and a ``notes`` node in parallel; both join back into
``model``. The tool counts its runs in a file beside the database.
"""

from __future__ import annotations

import json
import operator
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypedDict

import anyio
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode

from agent.cli import main as eventlog_cli
from agent.integrations.langgraph import (
    EventlogSaver,
    WritesPut,
    langgraph_types,
    session_id_for,
)
from eventlog import open_store

THREAD = "crash thread: lookup/γ"
CONFIG: RunnableConfig = {"configurable": {"thread_id": THREAD}}
ROUNDS = 3
INPUT = {"messages": [HumanMessage(content="look these up", id="user-1")], "notes": []}


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    notes: Annotated[list[str], operator.add]


def runs_file(db: str) -> Path:
    """Where the tool of the graph on ``db`` counts its runs."""
    return Path(db + ".runs")


#: Set by each child for the database it works on.
_RUNS: list[Path] = []


@tool
def lookup(key: str) -> str:
    """Look a key up (counts its runs: a resumed graph must not rerun a finished tool node)."""
    with _RUNS[0].open("a") as runs:
        runs.write(key + "\n")
    return f"value of {key}"


def model(state: State) -> dict[str, Any]:
    rounds = sum(isinstance(m, AIMessage) for m in state["messages"])
    if rounds == ROUNDS:
        return {"messages": [AIMessage(content="done", id="ai-final")]}
    calls = [
        {"name": "lookup", "args": {"key": f"k{rounds}-{j}"}, "id": f"call-{rounds}-{j}"}
        for j in range(2)
    ]
    return {"messages": [AIMessage(content=f"round {rounds}", id=f"ai-{rounds}", tool_calls=calls)]}


def notes(state: State) -> dict[str, Any]:
    return {"notes": [f"saw {len(state['messages'])} messages"]}


def route(state: State) -> Sequence[str]:
    last = state["messages"][-1]
    return ["tools", "notes"] if isinstance(last, AIMessage) and last.tool_calls else [END]


def build(saver: EventlogSaver) -> Any:
    graph = StateGraph(State)
    graph.add_node("model", model)
    graph.add_node("tools", ToolNode([lookup]))
    graph.add_node("notes", notes)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route, ["tools", "notes", END])
    graph.add_edge(["tools", "notes"], "model")
    return graph.compile(checkpointer=saver)


class KillingSaver(EventlogSaver):
    """The real saver, SIGKILLing its own process at boundary ``kill_at``."""

    def __init__(self, *args: Any, kill_at: int, progress: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kill_at = kill_at
        self.progress = progress
        self.boundary = 0

    def _cross(self, line: str | None = None) -> None:
        if line is not None:
            os.write(self.progress, (line + "\n").encode())
        self.boundary += 1
        if self.boundary == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        self._cross()
        result = await super().aput(config, checkpoint, metadata, new_versions)
        self._cross(f"returned put {checkpoint['id']}")
        return result

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._cross()
        await super().aput_writes(config, writes, task_id, task_path)
        self._cross(f"returned writes {config['configurable']['checkpoint_id']} {task_id}")


def final_state(values: dict[str, Any]) -> dict[str, Any]:
    """What the finished thread holds, comparable across runs (message ids are random)."""
    return {
        "messages": [[m.type, m.content] for m in values["messages"]],
        "notes": list(values["notes"]),
    }


async def run(db: str, progress_path: str, kill_at: int, durability: str) -> None:
    progress = os.open(progress_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    async with open_store(f"sqlite:///{db}", types=langgraph_types()) as store:
        async with KillingSaver(store, kill_at=kill_at, progress=progress) as saver:
            graph = build(saver)
            await graph.ainvoke(INPUT, CONFIG, durability=durability)
            os.write(progress, f"boundaries {saver.boundary}\n".encode())


def _tool_keys(messages: Any) -> set[str]:
    """The lookup keys whose tool results are among ``messages``."""
    if not isinstance(messages, list):
        return set()
    return {m.content.removeprefix("value of ") for m in messages if m.type == "tool"}


async def _inspect(db: str) -> dict[str, Any]:
    """What survived: every checkpoint (oldest first) with its step, parent and writes, and the
    keys whose tool results are durable (in a checkpoint's state or a pending write)."""
    async with open_store(f"sqlite:///{db}", types=langgraph_types()) as store:
        async with EventlogSaver(store) as saver:
            tuples = [t async for t in saver.alist(CONFIG)]
        exists = any(info.id == session_id_for(THREAD) for info in await store.list())
        # Writes against a checkpoint whose put is not durable are in the log but in no
        # checkpoint's pending writes (LangGraph's "async" durability puts after the writes).
        logged = (
            [
                [e.data.checkpoint_id, e.data.task_id]
                async for e in store.read(session_id_for(THREAD))
                if isinstance(e.data, WritesPut)
            ]
            if exists
            else []
        )
    durable_keys: set[str] = set()
    for t in tuples:
        durable_keys |= _tool_keys(t.checkpoint["channel_values"].get("messages"))
        for _task, channel, value in t.pending_writes or ():
            if channel == "messages":
                durable_keys |= _tool_keys(value)
    return {
        "session_exists": exists,
        "logged_writes": logged,
        "durable_tool_keys": sorted(durable_keys),
        "runs_before_resume": _RUNS[0].read_text().split() if _RUNS[0].exists() else [],
        "checkpoints": [
            {
                "id": t.config["configurable"]["checkpoint_id"],
                "parent": (t.parent_config or {}).get("configurable", {}).get("checkpoint_id"),
                "step": t.metadata.get("step"),
                "writes": sorted([task, channel] for task, channel, _ in t.pending_writes or ()),
            }
            for t in reversed(tuples)
        ],
    }


async def _resume(db: str) -> dict[str, Any]:
    """Finish the thread: resume from its latest checkpoint (or start it when none survived)."""
    async with open_store(f"sqlite:///{db}", types=langgraph_types()) as store:
        async with EventlogSaver(store) as saver:
            graph = build(saver)
            state = await graph.aget_state(CONFIG)
            if not state.values:
                await graph.ainvoke(INPUT, CONFIG, durability="sync")
            elif state.tasks:  # pending tasks (`next` omits an input not yet applied)
                await graph.ainvoke(None, CONFIG, durability="sync")
            return final_state((await graph.aget_state(CONFIG)).values)


def check(db: str, report_path: str) -> None:
    report = anyio.run(_inspect, db)
    # The eventlog command on what the kill left, before anything else writes to it.
    session_id = session_id_for(THREAD)
    report["verify"] = eventlog_cli(["--db", db, "--json", "verify", "--all"])
    if report["session_exists"]:  # a kill before the thread's first call leaves none
        report["audit"] = eventlog_cli(["--db", db, "--json", "audit", session_id])
    report["final"] = anyio.run(_resume, db)
    report["runs"] = _RUNS[0].read_text().split()
    Path(report_path).write_text(json.dumps(report))


def child(argv: list[str]) -> NoReturn:
    status = 1
    try:
        command, db, progress, *rest = argv
        _RUNS.append(runs_file(db))
        if command == "run":
            anyio.run(run, db, progress, int(rest[0]), rest[1])
        else:
            check(db, rest[0])
        status = 0
    finally:
        sys.stdout.flush()
        os._exit(status)


def zygote() -> None:
    import importlib

    importlib.import_module("anyio._backends._asyncio")
    importlib.import_module("eventlog.stores.sqlite")
    for line in sys.stdin:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child never returns
            sys.stdout = open(os.devnull, "w")  # the CLI's tables must not reach the parent
            child(line.split())
        _, status = os.waitpid(pid, 0)
        print(f"exit {status}", flush=True)


if __name__ == "__main__":
    zygote()
