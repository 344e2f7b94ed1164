"""Crash-test child: a graph paused by ``interrupt()`` for a person, its process SIGKILLed.

``python -m tests.langgraph_children.approval wait DB``
    runs the graph until the ``approve`` node's ``interrupt()`` pauses it before a money
    transfer, writes what the pause asks on stdout, then SIGKILLs its own process (the person
    has not answered yet).
``python -m tests.langgraph_children.approval answer DB ANSWER REPORT``
    in a new process: reads the pending interrupt from the stored thread, resumes the graph
    with ``Command(resume=ANSWER)`` and writes REPORT (JSON): the interrupt it found, the final
    messages and the transfers made (a ledger file beside DB).
"""

from __future__ import annotations

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
from langgraph.types import Command, interrupt

from agent.integrations.langgraph import DurableToolNode, EventlogSaver

THREAD = "approvals"
CONFIG: RunnableConfig = {"configurable": {"thread_id": THREAD}}
_LEDGER: list[Path] = []


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


@tool
def transfer(amount: int, to: str) -> str:
    """Move money."""
    with _LEDGER[0].open("a") as ledger:
        ledger.write(f"transfer {amount} {to}\n")
    return f"sent {amount} EUR to {to}"


def model(state: State) -> dict[str, Any]:
    last = state["messages"][-1]
    if isinstance(last, HumanMessage):
        calls = [{"name": "transfer", "args": {"amount": 50, "to": "bob"}, "id": "call-1"}]
        return {"messages": [AIMessage(content="paying", id="ai-0", tool_calls=calls)]}
    text = "paid" if isinstance(last, ToolMessage) and last.status != "error" else "not paid"
    return {"messages": [AIMessage(content=text, id="ai-final")]}


def approve(state: State) -> Command[Any]:
    """Pause for a person; a denial answers the call without running it."""
    reply = state["messages"][-1]
    assert isinstance(reply, AIMessage)
    answer = interrupt({"question": "approve the transfer?", "calls": reply.tool_calls})
    if answer == "approve":
        return Command(goto="tools")
    denied = [
        ToolMessage(content="denied by a person", tool_call_id=c["id"] or "", status="error")
        for c in reply.tool_calls
    ]
    return Command(goto="model", update={"messages": denied})


def route(state: State) -> str:
    last = state["messages"][-1]
    return "approve" if isinstance(last, AIMessage) and last.tool_calls else END


def build(saver: EventlogSaver) -> Any:
    graph = StateGraph(State)
    graph.add_node("model", model)
    graph.add_node("approve", approve, destinations=("tools", "model"))
    graph.add_node("tools", DurableToolNode([transfer], saver))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route, ["approve", END])
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=saver)


async def wait(db: str) -> None:
    async with EventlogSaver.from_conn_string(f"sqlite:///{db}") as saver:
        inputs = {"messages": [HumanMessage(content="pay bob 50", id="human-1")]}
        out = await build(saver).ainvoke(inputs, CONFIG)
        print(json.dumps([i.value for i in out["__interrupt__"]]), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # nobody answered before the process died


async def answer(db: str, reply: str, report: str) -> None:
    async with EventlogSaver.from_conn_string(f"sqlite:///{db}") as saver:
        graph = build(saver)
        pending = await graph.aget_state(CONFIG)
        found = [i.value for task in pending.tasks for i in task.interrupts]
        await graph.ainvoke(Command(resume=reply), CONFIG)
        final = await graph.aget_state(CONFIG)
    ledger = _LEDGER[0].read_text().splitlines() if _LEDGER[0].exists() else []
    document = {
        "pending": found,
        "next_before": list(pending.next),
        "messages": [[m.type, m.content] for m in final.values["messages"]],
        "ledger": ledger,
    }
    Path(report).write_text(json.dumps(document))


def main(argv: list[str]) -> None:
    command, db, *rest = argv
    _LEDGER.append(Path(db + ".ledger"))
    if command == "wait":
        anyio.run(wait, db)
    else:
        anyio.run(answer, db, rest[0], rest[1])


if __name__ == "__main__":
    main(sys.argv[1:])
