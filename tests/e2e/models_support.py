"""What the real-model e2e test and its child process share: the tools and the request params.

Gemma 3 270M is a base model: on its own it answers nothing through a chat template, so each
request tells it what to produce. ``tool_choice`` names the function (llama.cpp then constrains
the output to the tool's schema), and, to finish a turn, ``tool_choice: none`` with a JSON
``response_format`` (llama.cpp's grammar-constrained output) makes it write a text reply.
"""

from __future__ import annotations

import sys
from typing import Any

from agent import ToolOutput, tool

MAX_TOKENS = 48


def force(name: str) -> dict[str, Any]:
    """Params that make the model call ``name``."""
    return {
        "max_tokens": MAX_TOKENS,
        "temperature": 0,
        "tool_choice": {"type": "function", "function": {"name": name}},
    }


#: Params that make the model answer in text (a JSON object with an ``answer``).
ANSWER: dict[str, Any] = {
    "max_tokens": MAX_TOKENS,
    "temperature": 0,
    "tool_choice": "none",
    "response_format": {
        "type": "json_object",
        "schema": {
            "type": "object",
            "properties": {"answer": {"type": "string"}},
            "required": ["answer"],
        },
    },
}


@tool(safe=True)
def weather(city: str) -> ToolOutput:
    """The weather in a city."""
    return ToolOutput(content=f"sunny in {city}", concludes_turn=True)


@tool
async def book_table(restaurant: str) -> str:
    """Book a table at a restaurant."""
    # The child process is killed here: the booking may or may not have happened.
    print("inside book_table", flush=True)
    sys.stdin.readline()  # blocks until the parent kills this process
    return "booked"
