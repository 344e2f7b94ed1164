"""A child process living one life of an approval flow on a SQLite session, and SIGKILLing
itself at the boundary it is told to (a real ``kill -9`` of its own process, so the moment is
exact and the death is a real one).

Lives: ``ask`` (create or resume, prompt once, run until the turn waits), ``decide`` (resume and
record the decision on every waiting call), ``run`` (resume and run until idle). Kill points:

- ``request``: when the ``tool/approval-request`` is committed, before it is flushed;
- ``free-body``: inside the body of the call that needs no decision;
- ``waiting``: once ``run_until_idle`` returned ``awaiting approval``;
- ``decision``: when the ``tool/approval`` is committed, before it is flushed;
- ``decided``: once the decision call returned (durable);
- ``guarded-body``: inside the body of the call that needed a decision;
- ``none``: live to the end.

Every body first appends ``<name> <call id>`` to the marker file (one ``O_APPEND`` write,
which survives the kill), so the parent knows which bodies began.

    python -m tests.agent_children.approval_child URL SESSION LIFE KILL DECISION MARKER
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import anyio

from agent import Agent, ModelRequest, Response, ScriptedModel, tool
from eventlog import Event, SessionNotFoundError, ToolCallPart, open_store

__all__ = ("main",)


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _tools(marker: str, kill: str) -> list[Any]:
    def began(name: str, call_id: str) -> None:
        fd = os.open(marker, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{name} {call_id}\n".encode())
        finally:
            os.close(fd)
        if kill == f"{name}-body":
            _die()

    @tool(approval=True, safe=True)
    def guarded(context: Any) -> str:
        """Needs a decision."""
        began("guarded", context.call_id)
        return "guarded done"

    @tool(safe=True)
    def free(context: Any) -> str:
        """Needs none."""
        began("free", context.call_id)
        return "free done"

    return [guarded, free]


def _reply(request: ModelRequest) -> Response:
    if request.messages and request.messages[-1].role == "tool":
        return Response(text="finished")
    return Response(
        tool_calls=[
            ToolCallPart(id="g1", name="guarded", arguments="{}"),
            ToolCallPart(id="f1", name="free", arguments="{}"),
        ]
    )


async def main(url: str, session_id: str, life: str, kill: str, decision: str, marker: str) -> None:
    model = ScriptedModel(_reply)
    tools = _tools(marker, kill)
    async with open_store(url) as store:
        try:
            agent = await Agent.resume(store, session_id, model, tools)
        except SessionNotFoundError:
            agent = Agent(await store.create(session_id=session_id), model, tools)

        def watch(event: Event) -> None:
            if (kill, event.type) in (
                ("request", "tool/approval-request"),
                ("decision", "tool/approval"),
            ):
                _die()

        agent.session.subscribe(watch)
        if life == "ask":
            await agent.prompt("go", request_id="r1")
            outcomes = await agent.run_until_idle()
            if kill == "waiting" and [o.reason for o in outcomes] == ["awaiting approval"]:
                _die()
        elif life == "decide":
            for pending in await agent.pending_approvals():
                if decision == "approve":
                    await agent.approve(pending.call_id, by="parent")
                else:
                    await agent.deny(pending.call_id, by="parent", reason="not today")
                if kill == "decided":
                    _die()
        else:
            await agent.run_until_idle()
        await agent.session.aclose()


if __name__ == "__main__":
    url, session_id, life, kill, decision, marker = sys.argv[1:7]
    anyio.run(main, url, session_id, life, kill, decision, marker)
