"""Request bodies: the builders, and every body validated by the SDKs' own parameter types.

The bodies ``projections.openai_request`` / ``anthropic_request`` build for any generated agent
run (and for any crash of it, repaired) validate against ``openai``'s
``CompletionCreateParamsStreaming`` and ``anthropic``'s ``MessageCreateParamsStreaming``
through pydantic, extra keys forbidden. Pydantic checks ``Iterable`` fields lazily, so every
nested iterable is materialised (which runs its validation) before a body counts as valid.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pytest
from anthropic.types import (
    AssistantMessageParam,
    TextBlockParam,
    ThinkingBlockParam,
    ToolResultBlockParam,
    ToolUseBlockParam,
    UserMessageParam,
)
from anthropic.types.message_create_params import MessageCreateParamsStreaming
from hypothesis import given, note
from hypothesis import strategies as st
from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionSystemMessageParam,
    ChatCompletionToolMessageParam,
    ChatCompletionUserMessageParam,
)
from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming
from pydantic import TypeAdapter

from agent._request import last_header
from eventlog import Message, ToolCallPart, ToolSpec, ValidationError, open_store
from projections import anthropic_request, messages, openai_request
from recovery import repair
from recovery.testing import AgentRun, agent_runs

pytestmark = pytest.mark.anyio

OPENAI_BODY: TypeAdapter[Any] = TypeAdapter(CompletionCreateParamsStreaming)
ANTHROPIC_BODY: TypeAdapter[Any] = TypeAdapter(MessageCreateParamsStreaming)
# Pydantic ignores unknown keys of a TypedDict: these are checked against the types' own keys.
OPENAI_MESSAGE = {
    "system": ChatCompletionSystemMessageParam,
    "user": ChatCompletionUserMessageParam,
    "assistant": ChatCompletionAssistantMessageParam,
    "tool": ChatCompletionToolMessageParam,
}
ANTHROPIC_MESSAGE = {"user": UserMessageParam, "assistant": AssistantMessageParam}
ANTHROPIC_BLOCK = {
    "text": TextBlockParam,
    "thinking": ThinkingBlockParam,
    "tool_use": ToolUseBlockParam,
    "tool_result": ToolResultBlockParam,
}
TOOLS = (
    ToolSpec(
        name="search",
        description="Search.",
        parameters={"type": "object", "properties": {"q": {"type": "string"}}},
    ),
    ToolSpec(name="noop"),
)


def materialise(value: Any) -> Any:
    """Walk ``value``, turning every lazily validated iterable into a list (validating it)."""
    if isinstance(value, str | bytes | int | float | bool) or value is None:
        return value
    if isinstance(value, Mapping):
        return {k: materialise(v) for k, v in value.items()}
    if isinstance(value, Iterable):
        return [materialise(v) for v in value]
    return value


def keys_of(typed_dict: Any) -> set[str]:
    return set(typed_dict.__required_keys__ | typed_dict.__optional_keys__)


def no_unknown_keys(value: Mapping[str, Any], typed_dict: Any, where: str) -> None:
    unknown = set(value) - keys_of(typed_dict)
    if unknown:
        raise ValueError(f"{where}: unexpected keys {sorted(unknown)}")


def valid_openai(body: dict[str, Any]) -> None:
    body = body | {"stream": True}
    materialise(OPENAI_BODY.validate_python(body))
    no_unknown_keys(body, CompletionCreateParamsStreaming, "body")
    for n, message in enumerate(body["messages"]):
        no_unknown_keys(message, OPENAI_MESSAGE[message["role"]], f"messages[{n}]")


def valid_anthropic(body: dict[str, Any]) -> None:
    body = body | {"stream": True}
    materialise(ANTHROPIC_BODY.validate_python(body))
    no_unknown_keys(body, MessageCreateParamsStreaming, "body")
    for n, message in enumerate(body["messages"]):
        no_unknown_keys(message, ANTHROPIC_MESSAGE[message["role"]], f"messages[{n}]")
        for b, block in enumerate(message["content"]):
            no_unknown_keys(block, ANTHROPIC_BLOCK[block["type"]], f"messages[{n}][{b}]")


async def bodies_of(run: AgentRun, kept: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The bodies after the whole run, and after a crash at ``kept`` events, repaired."""
    out = []
    async with open_store("memory:") as store:
        for stop in (None, kept):
            session = await store.create()
            run.commit(session, stop)
            await repair(session)
            system, tools, model, _ = last_header(session)
            header: dict[str, Any] = {
                "system": system or "",
                "tools": tools or TOOLS,
                "model": model or "m",
            }
            history = list(messages(session))
            note(f"{len(history)} messages after {session.head + 1} events")
            out.append((openai_request(history, **header), anthropic_request(history, **header)))
    return out


@given(run=agent_runs(), crash=st.integers(0, 10_000))
async def test_every_body_validates_against_the_sdk_types(run: AgentRun, crash: int) -> None:
    kept = crash % (len(run) + 1)  # the crash point: any event boundary of the run
    for openai_body, anthropic_body in await bodies_of(run, kept):
        valid_openai(openai_body)
        valid_anthropic(anthropic_body)


def test_the_validation_catches_a_bad_body() -> None:
    # The check can fail: a bad tool call (found only when the lazy iterable is materialised),
    # a bad Anthropic block, an unknown key.
    bad_call = {"role": "assistant", "content": "", "tool_calls": [{"id": 1, "type": "function"}]}
    with pytest.raises(ValueError, match=r"(?s)ValidatorIterator.*FunctionToolCallParam\.id"):
        valid_openai({"model": "m", "messages": [bad_call]})
    bad_block = {"role": "user", "content": [{"type": "tool_result"}]}
    with pytest.raises(ValueError, match="tool_use_id"):
        valid_anthropic({"model": "m", "max_tokens": 1, "messages": [bad_block]})
    with pytest.raises(ValueError, match="body: unexpected keys"):
        valid_openai({"model": "m", "messages": [], "not_a_parameter": 1})


def test_the_builders_put_header_and_params_in_place() -> None:
    history = [
        Message.user("hi"),
        Message(
            id="a",
            role="assistant",
            content=(ToolCallPart(id="c1", name="noop", arguments=""),),
        ),
    ]
    body = openai_request(
        history, system="S", tools=TOOLS[1:], model="m", params={"temperature": 0.5}
    )
    assert body == {
        "model": "m",
        "messages": [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "noop", "arguments": ""}}
                ],
            },
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "noop",
                    "description": "",
                    "parameters": {"type": "object", "properties": {}},
                },
            }
        ],
        "temperature": 0.5,
    }
    # No system prompt, no tools: neither key is sent (OpenAI refuses an empty tools list).
    assert set(openai_request(history[:1], model="m")) == {"model", "messages"}
    body = anthropic_request(history[:1], model="c", params={"max_tokens": 9})
    assert body == {
        "model": "c",
        "max_tokens": 9,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }
    assert anthropic_request([], model="c")["max_tokens"] == 4096


@pytest.mark.parametrize("key", ["messages", "stream", "tools"])
def test_a_param_cannot_replace_what_the_builder_owns(key: str) -> None:
    with pytest.raises(ValidationError, match=f"openai_request: parameter '{key}' is part of"):
        openai_request([], params={key: 1})
    with pytest.raises(ValidationError, match=f"anthropic_request: parameter '{key}'"):
        anthropic_request([], params={key: 1})
