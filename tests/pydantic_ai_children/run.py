"""One run of a pydantic-ai agent on ``EventlogHistory``: ``python -m ... DB MARKER [kill]``.

With ``kill``, the ``transfer`` tool SIGKILLs its own process right after its effect: a crash
inside a tool body, after ``lookup`` finished and before ``notify`` started. Without it, the
history is continued: a new prompt, or (``pending``) the cut run with no prompt. Prints the run's
output and whether the history was pending.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from agent.integrations.pydantic_ai import EventlogHistory, pydantic_ai_types
from eventlog import open_store
from tests.pydantic_ai_children.support import make_agent, make_tools


async def main(db: str, marker: Path, kill: bool) -> None:
    agent = make_agent()
    tools = make_tools(marker, kill_in="transfer" if kill else None)
    async with open_store(db, types=pydantic_ai_types()) as store:
        history = await EventlogHistory.open(store, "conversation-1")
        pending = history.pending
        prompt = None if pending else "Pay bob 10."
        toolsets = [history.durable(tools)]
        result = await agent.run(prompt, message_history=history.messages(), toolsets=toolsets)
        await history.record(result)
        print(f"pending={pending}", flush=True)
        print(result.output, flush=True)


if __name__ == "__main__":
    db, marker, *rest = sys.argv[1:]
    anyio.run(main, db, Path(marker), rest == ["kill"])
