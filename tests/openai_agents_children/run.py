"""One run of a real SDK agent on ``EventlogSession``: ``python -m ... DB URL TEXT MARKER [kill]``.

The agent's one tool, ``send_email``, appends a line to ``MARKER`` (its external effect) and,
with ``kill``, SIGKILLs its own process right after: a crash inside the tool body, after the
effect and before the SDK could record anything. Prints the run's final output otherwise.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import anyio
from agents import Runner, function_tool

from agent.integrations.openai_agents import EventlogSession, openai_agents_types
from eventlog import open_store
from tests.openai_agents_children.support import client_for, make_agent


async def main(db: str, url: str, text: str, marker: Path, kill: bool) -> None:
    @function_tool
    def send_email(to: str) -> str:
        """Send an email to someone."""
        with marker.open("a") as out:
            out.write(f"sent to {to}\n")
        if kill:
            os.kill(os.getpid(), signal.SIGKILL)
        return f"sent to {to}"

    client = client_for(url)
    agent = make_agent(client, [send_email])
    async with open_store(db, types=openai_agents_types()) as store:
        session = await EventlogSession.open(store, "conversation-1")
        result = await Runner.run(agent, text, session=session, hooks=session.hooks)
        print(result.final_output, flush=True)
    await client.close()


if __name__ == "__main__":
    db, url, text, marker, *rest = sys.argv[1:]
    anyio.run(main, db, url, text, Path(marker), rest == ["kill"])
