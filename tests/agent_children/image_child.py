"""A child process whose agent sends an image to a provider, then hangs in a tool until killed.

It stores the image as an attachment, prompts with it, and runs a turn through ``OpenAIChat``
against the test's loopback server; the tool the model calls prints ``started`` on stdout
(the parent's cue to SIGKILL it) and then waits forever::

    python -m tests.agent_children.image_child sqlite:///x.db SESSION_ID SERVER_URL IMAGE_FILE
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from agent import Agent, tool
from agent.models import OpenAIChat
from eventlog import ImagePart, Message, MessageSource, TextPart, open_store


@tool
async def inspect() -> str:
    """Inspect the picture closely."""
    print("started", flush=True)
    await anyio.Event().wait()  # never set: the parent kills the process here
    return "unreachable"


async def main(url: str, session_id: str, server: str, image: Path) -> None:
    async with open_store(url) as store:
        session = await store.create(session_id=session_id)
        digest = await store.put_attachment(image.read_bytes())
        message = Message(
            id="m-image",
            role="user",
            content=(
                TextPart(text="What is this?"),
                ImagePart(media_type="image/png", attachment=digest),
            ),
            source=MessageSource(kind="user"),
        )
        model = OpenAIChat("test-model", base_url=server + "/v1", api_key="test")
        agent = Agent(session, model, [inspect], store=store)
        agent.followup(message)
        await agent.run_until_idle()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4]))
