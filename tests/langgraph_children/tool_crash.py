"""Crash-test child: a money transfer SIGKILLed inside its tool body, in a real LangGraph graph.

``python -m tests.langgraph_children.tool_crash run DB``
    runs the graph on a fresh thread; the model (scripted) first proposes two parallel calls,
    ``balance`` then ``transfer``; ``balance`` returns at once, ``transfer`` records the
    transfer in a ledger file beside DB and, on its first run, SIGKILLs its own process before
    it returns.
``python -m tests.langgraph_children.tool_crash resume DB REPORT``
    reopens the thread in a new process, resumes it with ``ainvoke(None, cfg)`` and writes
    REPORT (JSON): the final messages, the ledger and ``eventlog audit``'s exit status.

After the resume the model sees what the tools answered and, when the transfer's outcome is
unknown, proposes a ``balance`` check (a call that never ran before) and then answers.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Annotated, Any, TypedDict

import anyio
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from agent.cli import main as eventlog_cli
from agent.integrations.langgraph import (
    DurableToolNode,
    EventlogSaver,
    langgraph_types,
    session_id_for,
)
from eventlog import open_store

THREAD = "payments"
CONFIG: RunnableConfig = {"configurable": {"thread_id": THREAD}}
_LEDGER: list[Path] = []


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


@tool
def balance(account: str) -> str:
    """The balance of an account."""
    with _LEDGER[0].open("a") as ledger:
        ledger.write(f"balance {account}\n")
    return f"{account}: 100 EUR"


@tool
async def transfer(amount: int, to: str) -> str:
    """Move money (not idempotent: it must never run twice)."""
    await asyncio.sleep(0.2)  # balance finishes first: its outcome is durable before the kill
    with _LEDGER[0].open("a") as ledger:
        ledger.write(f"transfer {amount} {to}\n")
    if os.environ.get("TOOL_CRASH_KILL") == "1":
        os.kill(os.getpid(), signal.SIGKILL)  # the money moved; the result never came back
    return f"sent {amount} EUR to {to}"


def model(state: State) -> dict[str, Any]:
    """Scripted: two parallel calls, then a check after an unknown outcome, then an answer."""
    rounds = sum(isinstance(m, AIMessage) for m in state["messages"])
    if rounds == 0:
        calls = [
            {"name": "balance", "args": {"account": "alice"}, "id": "call-balance"},
            {"name": "transfer", "args": {"amount": 50, "to": "bob"}, "id": "call-transfer"},
        ]
        return {"messages": [AIMessage(content="paying bob", id="ai-0", tool_calls=calls)]}
    last = state["messages"][-1]
    if rounds == 1 and isinstance(last, ToolMessage) and last.status == "error":
        check = [{"name": "balance", "args": {"account": "bob"}, "id": "call-check"}]
        return {"messages": [AIMessage(content="checking", id="ai-1", tool_calls=check)]}
    return {"messages": [AIMessage(content="done", id="ai-final")]}


def route(state: State) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def build(saver: EventlogSaver) -> Any:
    graph = StateGraph(State)
    graph.add_node("model", model)
    graph.add_node("tools", DurableToolNode([balance, transfer], saver))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route, ["tools", END])
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=saver)


async def run(db: str) -> None:
    async with open_store(f"sqlite:///{db}", types=langgraph_types()) as store:
        async with EventlogSaver(store) as saver:
            inputs = {"messages": [HumanMessage(content="pay bob 50", id="human-1")]}
            await build(saver).ainvoke(inputs, CONFIG)


async def resume(db: str) -> list[dict[str, Any]]:
    async with open_store(f"sqlite:///{db}", types=langgraph_types()) as store:
        async with EventlogSaver(store) as saver:
            graph = build(saver)
            await graph.ainvoke(None, CONFIG)
            state = await graph.aget_state(CONFIG)
    return [
        {
            "type": m.type,
            "content": m.content,
            "status": getattr(m, "status", None),
            "tool_call_id": getattr(m, "tool_call_id", None),
        }
        for m in state.values["messages"]
    ]


def main(argv: list[str]) -> None:
    command, db, *rest = argv
    _LEDGER.append(Path(db + ".ledger"))
    if command == "run":
        anyio.run(run, db)
        return
    messages = anyio.run(resume, db)
    sys.stdout = open(os.devnull, "w")  # the CLI's tables are not the report
    audit = eventlog_cli(["--db", db, "--json", "audit", session_id_for(THREAD)])
    report = {
        "messages": messages,
        "ledger": _LEDGER[0].read_text().splitlines(),
        "audit": audit,
    }
    Path(rest[0]).write_text(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1:])
