"""A real SDK agent whose ``pay`` tool needs approval, one life of it per process:
``python -m ... DB URL MARKER ask|resume|resume-kill``.

- ``ask``: run ``Pay 3 and 4.``; the run is interrupted for approval; keep the pause
  (``save_interruption``), print the waiting call ids, then SIGKILL the process: whatever
  was to decide it is gone with it.
- ``resume``: open the session in a new process, rebuild the run from the log
  (``pending_run``, with the decisions ``eventlog approve``/``deny`` recorded), run it to its
  end and print its final output (``nothing waits`` when no saved run waits).
- ``resume-kill``: as ``resume``, but the process SIGKILLs itself inside ``pay``'s body, after
  its effect.

``pay`` appends ``paid AMOUNT`` to ``MARKER`` (its external effect), so the test counts bodies.
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


async def main(db: str, url: str, marker: Path, life: str) -> None:
    @function_tool(needs_approval=True)
    def pay(amount: int) -> str:
        """Pay an amount."""
        with marker.open("a") as out:
            out.write(f"paid {amount}\n")
        if life == "resume-kill":
            os.kill(os.getpid(), signal.SIGKILL)
        return f"paid {amount}"

    client = client_for(url)
    agent = make_agent(client, [pay])
    async with open_store(db, types=openai_agents_types()) as store:
        session = await EventlogSession.open(store, "conversation-1")
        if life == "ask":
            paused = await Runner.run(agent, "Pay 3 and 4.", session=session, hooks=session.hooks)
            waiting = await session.save_interruption(paused)
            print(" ".join(call.call_id for call in waiting), flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        state = await session.pending_run(agent)
        if state is None:
            print("nothing waits", flush=True)
        else:
            result = await Runner.run(agent, state, session=session, hooks=session.hooks)
            print(result.final_output, flush=True)
    await client.close()


if __name__ == "__main__":
    db, url, marker, life = sys.argv[1:]
    anyio.run(main, db, url, Path(marker), life)
