"""A child process whose step runs against a ``before_step`` plan's tools, asks for a decision,
and is SIGKILLed (by itself, so the moment is exact) inside a call that needs none.

The agent has three tools: ``delete`` (needs a decision), ``check`` (needs none) and ``secret``.
The hook plans every step with ``delete`` and ``check`` only, so ``secret`` is not offered. The
model proposes ``delete``, ``check`` and ``secret`` (as models do: a tool the request did not
declare). ``delete`` waits; ``check`` runs alone (it is not concurrency-safe) and kills the
process inside its body, before the executor ever looks at ``secret``.

Every body first appends ``<name>`` to the marker file (one ``O_APPEND`` write, which survives
the kill).

    python -m tests.agent_children.plan_child URL SESSION MARKER
"""

from __future__ import annotations

import os
import signal
import sys

import anyio

from agent import Agent, Response, ScriptedModel, StepContext, StepPlan, tool
from eventlog import ToolCallPart, open_store

__all__ = ("began", "main")


def began(marker: str, name: str) -> None:
    """Note in ``marker`` that the body of ``name`` began."""
    fd = os.open(marker, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{name}\n".encode())
    finally:
        os.close(fd)


async def main(url: str, session_id: str, marker: str) -> None:
    @tool(approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        began(marker, "delete")
        return f"deleted {path}"

    @tool
    def check() -> str:
        """Check something."""
        began(marker, "check")
        os.kill(os.getpid(), signal.SIGKILL)
        return "checked"  # unreachable

    @tool
    def secret() -> str:
        """Never offered in a planned step."""
        began(marker, "secret")
        return "the secret"

    def plan(ctx: StepContext) -> StepPlan:
        return StepPlan(tools=[delete, check])

    calls = [
        ToolCallPart(id="d1", name="delete", arguments='{"path": "a.txt"}'),
        ToolCallPart(id="c1", name="check", arguments="{}"),
        ToolCallPart(id="s1", name="secret", arguments="{}"),
    ]
    model = ScriptedModel([Response(tool_calls=calls)])
    async with open_store(url) as store:
        session = await store.create(session_id=session_id)
        agent = Agent(session, model, [delete, check, secret], before_step=plan)
        agent.followup("clean up")
        await agent.run_until_idle()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3])
