"""``python -m tests.e2e.models_child URL DB_URL SESSION``: run one turn that calls ``book_table``
through the real model, and be SIGKILLed by the parent inside the tool body."""

from __future__ import annotations

import sys

import anyio

from agent import Agent
from agent.models import OpenAIChat
from eventlog import open_store
from tests.e2e.models_support import book_table, force, weather


async def main(url: str, db_url: str, session_id: str) -> None:
    async with open_store(db_url) as store, OpenAIChat("gemma", base_url=url) as model:
        agent = await Agent.resume(
            store, session_id, model, [weather, book_table], params=force("book_table")
        )
        agent.followup("Book a table at Chez Paul.")
        await agent.run_until_idle()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3])
