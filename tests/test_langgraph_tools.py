"""Crash-honest tool calls in a real LangGraph graph (``DurableToolNode``).

A child process runs a graph whose model proposes two parallel calls, a balance check and a
money transfer; the transfer's body moves the money and the process is SIGKILLed before it
returns. A new process resumes the thread with ``ainvoke(None, cfg)``. The transfer must not
run again: the model gets a ``ToolMessage`` of status ``error`` saying its outcome is unknown
(``TOOL_OUTCOME_UNKNOWN``), the finished balance check is answered from the journal without a
second run, both answers keep the model's order, and a call the model proposes afterwards (one
that never started) runs as usual.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, MessagesState, StateGraph
from opentelemetry.trace import StatusCode

from agent.integrations.langgraph import (
    EventlogSaver,
    durable_tool_calls,
    langgraph_types,
    session_id_for,
)
from agent.otel import session_spans
from agent.web import export_html
from eventlog import ToolCall, ToolOutcome, ToolResult, ToolResultPart, open_store
from recovery import TOOL_OUTCOME_UNKNOWN

ROOT = Path(__file__).resolve().parent.parent
CHILD = "tests.langgraph_children.tool_crash"


def _child(*args: object, kill: bool) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOOL_CRASH_KILL": "1" if kill else "0"}
    return subprocess.run(
        [sys.executable, "-m", CHILD, *map(str, args)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


async def _journal(db: Path) -> list[tuple[str, Any]]:
    async with open_store(f"sqlite:///{db}", types=langgraph_types()) as store:
        return [
            (e.type, e.data)
            async for e in store.read(session_id_for("payments"))
            if e.type.startswith(("turn/", "step/", "tool/", "user/", "assistant/"))
        ]


def test_a_transfer_killed_in_its_body_is_never_run_again(tmp_path: Path) -> None:
    db, report = tmp_path / "pay.db", tmp_path / "report.json"
    killed = _child("run", db, kill=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    ledger = (tmp_path / "pay.db.ledger").read_text().splitlines()
    assert ledger == ["balance alice", "transfer 50 bob"]

    resumed = _child("resume", db, report, kill=False)
    assert resumed.returncode == 0, resumed.stderr
    found = json.loads(report.read_text())

    # The transfer ran once; the balance check was not repeated; the later check ran.
    assert found["ledger"] == ["balance alice", "transfer 50 bob", "balance bob"]
    messages = found["messages"]
    tools = [m for m in messages if m["type"] == "tool"]
    # The model's order: balance, then transfer, whatever order they finished in.
    assert [m["tool_call_id"] for m in tools] == ["call-balance", "call-transfer", "call-check"]
    assert tools[0] == {**tools[0], "content": "alice: 100 EUR", "status": "success"}
    assert tools[1]["status"] == "error"
    assert "may or may not have run" in tools[1]["content"]
    assert "transfer" in tools[1]["content"] and "call-transfer" in tools[1]["content"]
    assert tools[2]["content"] == "bob: 100 EUR"
    assert messages[-1] == {**messages[-1], "type": "ai", "content": "done"}
    # ``eventlog audit`` sees the thread's turn, steps and calls, the transfer's outcome
    # unknown (so it exits 1: something in the run needs a person's look), nothing to repair.
    assert found["audit"] == 1
    audit = subprocess.run(
        [sys.executable, "-m", "agent.cli", "--db", str(db), "--json", "audit", "lg-payments"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    document = json.loads(audit.stdout)
    assert document["state"] == "balanced" and document["integrity"]["ok"]
    assert document["open_turn"] is None and document["failed_turns"] == []
    fates = {c["call_id"]: (c["outcome"], c["state"]) for c in document["calls"]}
    assert fates == {
        "call-balance": ("completed", "resulted"),
        "call-transfer": ("outcome unknown", "resulted"),
        "call-check": ("completed", "resulted"),
    }

    # The journal: each call started before its body, the unknown outcome on record, the
    # answers in the model's order.
    journal = anyio.run(_journal, db)
    types = [t for t, _ in journal]
    assert types[:4] == ["turn/start", "user/message", "step/start", "assistant/message"]
    calls = [d.call_id for t, d in journal if isinstance(d, ToolCall)]
    assert calls == ["call-balance", "call-transfer", "call-check"]
    outcomes = {d.call_id: d for t, d in journal if isinstance(d, ToolOutcome)}
    unknown = outcomes["call-transfer"].error
    assert unknown is not None and unknown.code == TOOL_OUTCOME_UNKNOWN
    results = [
        part.call_id
        for _, d in journal
        if isinstance(d, ToolResult)
        for part in d.message.content
        if isinstance(part, ToolResultPart)
    ]
    assert results == ["call-balance", "call-transfer", "call-check"]
    # Two tool steps and the answer's step, in one turn the answer ended.
    assert types.count("step/start") == types.count("step/end") == 3
    assert types[-1] == "turn/end" and types.count("turn/start") == 1

    # The OTLP export reads the same journal: the turn, its three model calls and the tools.
    spans = anyio.run(_spans, db)
    assert [name for name, _ in spans] == [
        "chat", "execute_tool balance", "execute_tool transfer", "chat", "execute_tool balance",
        "chat", "invoke_agent",
    ]  # fmt: skip
    assert [name for name, error in spans if error] == ["execute_tool transfer"]
    # So does the web app: the thread's page draws its turn and lists its calls.
    page = anyio.run(_page, db)
    assert "no turns yet" not in page and "no tool calls" not in page
    assert all(call in page for call in ("call-balance", "call-transfer", "call-check"))


async def _spans(db: Path) -> list[tuple[str, bool]]:
    async with open_store(f"sqlite:///{db}", types=langgraph_types()) as store:
        session = await store.open(session_id_for("payments"))
        try:
            return [
                (span.name, span.status.status_code == StatusCode.ERROR)
                for span in session_spans(session)
            ]
        finally:
            await session.aclose()


async def _page(db: Path) -> str:
    async with open_store(f"sqlite:///{db}", types=langgraph_types()) as store:
        return (await export_html(store, session_id_for("payments"))).html


def test_the_wrappers_journal_a_users_own_tool_node_under_graph_invoke(tmp_path: Path) -> None:
    # A sync graph (``graph.invoke`` from a worker thread) with the user's own ToolNode
    # given the wrappers: each call is journalled, and a rerun of the same reply is answered
    # from the journal, not run again.
    from langchain_core.tools import tool
    from langgraph.prebuilt import ToolNode

    runs: list[str] = []

    @tool
    def echo(text: str) -> str:
        """Echo."""
        runs.append(text)
        return text.upper()

    def model(state: MessagesState) -> dict[str, Any]:
        if isinstance(state["messages"][-1], HumanMessage):
            calls = [{"name": "echo", "args": {"text": "hi"}, "id": "c1"}]
            return {"messages": [AIMessage(content="", id="a1", tool_calls=calls)]}
        return {"messages": [AIMessage(content="ok", id="a2")]}

    async def scenario() -> list[tuple[str, Any]]:
        async with open_store(f"sqlite:///{tmp_path / 's.db'}", types=langgraph_types()) as store:
            async with EventlogSaver(store) as saver:
                wrap, awrap = durable_tool_calls(saver)
                graph = StateGraph(MessagesState)
                graph.add_node("model", model)
                graph.add_node(
                    "tools", ToolNode([echo], wrap_tool_call=wrap, awrap_tool_call=awrap)
                )
                graph.add_edge(START, "model")
                graph.add_conditional_edges(
                    "model", lambda s: "tools" if s["messages"][-1].tool_calls else END
                )
                graph.add_edge("tools", "model")
                app = graph.compile(checkpointer=saver)
                cfg: RunnableConfig = {"configurable": {"thread_id": "sync"}}
                inputs = MessagesState(messages=[HumanMessage(content="hi", id="h1")])
                out = await anyio.to_thread.run_sync(lambda: app.invoke(inputs, cfg))
                assert [m.content for m in out["messages"]] == ["hi", "", "HI", "ok"]
                # The same reply again (a replay from the reply's checkpoint): not rerun.
                history = [s async for s in app.aget_state_history(cfg)]
                at_reply = next(s for s in history if s.next == ("tools",))
                again = await anyio.to_thread.run_sync(lambda: app.invoke(None, at_reply.config))
                assert again["messages"][2].content == "HI"
            return await _journal_of(store, "sync")

    journal = anyio.run(scenario)
    assert runs == ["hi"]
    assert [t for t, _ in journal].count("tool/call") == 1


async def _journal_of(store: Any, thread: str) -> list[tuple[str, Any]]:
    return [(e.type, e.data) async for e in store.read(session_id_for(thread))]
