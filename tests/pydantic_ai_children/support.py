"""A pydantic-ai ``Agent`` on its own ``FunctionModel`` (no network) and three tools that leave
a trace of each run of their bodies in a marker file.

The model asks for ``lookup``, ``transfer`` and ``notify`` in one reply when the request holds
a user prompt, and answers with what the tool results said otherwise, so a test reads from the
final output exactly what the model was told about each call.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

CALLS = (
    ("call_1", "lookup", {"who": "bob"}),
    ("call_2", "transfer", {"to": "bob", "amount": 10}),
    ("call_3", "notify", {"to": "bob"}),
)


def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Tool calls after a user prompt; after tool results, a text listing what each said."""
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    if any(isinstance(part, UserPromptPart) for part in last.parts):
        return ModelResponse(
            parts=[ToolCallPart(name, args, tool_call_id=cid) for cid, name, args in CALLS]
        )
    seen = [
        {"id": part.tool_call_id, "outcome": part.outcome, "content": part.content}
        for part in last.parts
        if isinstance(part, ToolReturnPart)
    ]
    return ModelResponse(parts=[TextPart(json.dumps(seen))])


def make_agent() -> Agent[None, str]:
    return Agent(FunctionModel(reply))


def make_tools(marker: Path, *, kill_in: str | None = None) -> FunctionToolset[Any]:
    """The three tools, each run alone in the model's order (``sequential``); ``kill_in`` names
    the one whose body SIGKILLs its process right after its effect."""
    tools: FunctionToolset[Any] = FunctionToolset()

    def effect(name: str) -> None:
        with marker.open("a") as out:
            out.write(f"{name}\n")
        if kill_in == name:
            os.kill(os.getpid(), signal.SIGKILL)

    @tools.tool_plain(sequential=True)
    def lookup(who: str) -> str:
        """Look up an account."""
        effect("lookup")
        return f"{who}: account 42"

    @tools.tool_plain(sequential=True)
    def transfer(to: str, amount: int) -> str:
        """Transfer money."""
        effect("transfer")
        return f"sent {amount} to {to}"

    @tools.tool_plain(sequential=True)
    def notify(to: str) -> str:
        """Notify someone."""
        effect("notify")
        return f"notified {to}"

    return tools
