"""The real ``Runner`` on ``OpenAIChatCompletionsModel`` over ``AsyncOpenAI``, pointed at the
loopback provider server; non-streamed replies in the Chat Completions wire format."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agents import Agent, OpenAIChatCompletionsModel, set_tracing_disabled
from openai import AsyncOpenAI

from tests.llm_server import Reply

# No network in tests: the SDK's tracing exporter would post to api.openai.com.
set_tracing_disabled(True)


def completion(
    *, text: str | None = None, calls: Sequence[tuple[str, str, dict[str, Any]]] = ()
) -> Reply:
    """A ``chat.completion`` body: ``text``, or tool calls ``(id, name, arguments)``."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {
                "id": cid,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for cid, name, args in calls
        ]
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "test-model",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    }
    return Reply(body=body)


def client_for(url: str) -> AsyncOpenAI:
    """An SDK client on the loopback server (close it: ``await client.close()``)."""
    return AsyncOpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0)


def make_agent(client: AsyncOpenAI, tools: list[Any]) -> Agent[Any]:
    model = OpenAIChatCompletionsModel(model="test-model", openai_client=client)
    return Agent(name="assistant", instructions="Be brief.", model=model, tools=tools)
