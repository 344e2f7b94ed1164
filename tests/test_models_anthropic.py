"""``AnthropicMessages`` through the real ``anthropic`` SDK against the loopback server.

Anthropic has no local server: these loopback tests, in the Messages API's documented stream
format, are the proof of the adapter.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from agent import Agent, ModelError, ModelRequest, ReasoningDelta, RetryPolicy, tool
from agent.models import AnthropicMessages
from eventlog import Message, ReasoningPart, Session, TextPart, ToolCallPart, Usage
from tests.agent_children.support import events_of
from tests.llm_server import LLMServer, Reply, anthropic_events, anthropic_sse

pytestmark = pytest.mark.anyio

#: The default back-off scaled down 500 times, so tests that retry do not wait for long.
QUICK = RetryPolicy(initial_delay=0.001, max_delay=0.016)


@tool(safe=True)
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@pytest.fixture
def server() -> Iterator[LLMServer]:
    with LLMServer() as server:
        yield server


def model_for(server: LLMServer, **options: Any) -> AnthropicMessages:
    return AnthropicMessages("claude-test", base_url=server.url, api_key="sk-ant", **options)


async def run_turn(agent: Agent, text: str) -> str:
    agent.followup(text)
    with anyio.fail_after(20):
        (outcome,) = await agent.run_until_idle()
    return outcome.reason


async def test_thinking_text_and_tool_use_round_trip(server: LLMServer, session: Session) -> None:
    # A signed thinking block, text and a tool_use whose input streams in pieces.
    server.script(
        Reply(
            events=anthropic_events(
                thinking=("Check the weather tool.", "sig-123"),
                text="Let me look.",
                calls=[("toolu_1", "weather", '{"city": "Kyoto"}')],
                cache_read=6,
            )
        ),
        Reply(events=anthropic_events(text="Sunny in Kyoto.")),
    )
    model = model_for(server)
    agent = Agent(session, model, [weather], system="Be brief.", params={"max_tokens": 256})
    assert await run_turn(agent, "Kyoto?") == "completed"
    await model.aclose()
    # The reply kept the thinking with its signature, the text and the call.
    first = events_of(session, "assistant/message")[0].data
    assert first.message.content == (
        ReasoningPart(text="Check the weather tool.", signature="sig-123"),
        TextPart(text="Let me look."),
        ToolCallPart(id="toolu_1", name="weather", arguments='{"city": "Kyoto"}'),
    )
    assert first.usage == Usage(input_tokens=10, output_tokens=5, cache_read_tokens=6)
    # The first request: the exact Messages body.
    assert server.received[0].path == "/v1/messages"
    headers = server.received[0].headers  # the key goes as x-api-key or a bearer token
    assert "sk-ant" in (headers.get("x-api-key"), headers.get("authorization", "")[7:])
    assert server.bodies[0] == {
        "model": "claude-test",
        "max_tokens": 256,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Kyoto?"}]}],
        "tools": [
            {
                "name": "weather",
                "description": "The weather in a city.",
                "input_schema": weather.parameters,
            }
        ],
        "stream": True,
    }
    # The second sends the thinking back unchanged, the call as tool_use, then its result.
    assert server.bodies[1]["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Check the weather tool.", "signature": "sig-123"},
                {"type": "text", "text": "Let me look."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "weather",
                    "input": {"city": "Kyoto"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "is_error": False,
                    "content": "sunny in Kyoto",
                }
            ],
        },
    ]


async def test_redacted_thinking_is_streamed_with_its_data(server: LLMServer) -> None:
    server.script(Reply(events=anthropic_events(redacted="EnCrYpTeD", text="ok")))
    async with model_for(server) as model:
        chunks = [c async for c in model.stream(ModelRequest(messages=[Message.user("hi")]))]
    assert ReasoningDelta(text="", redacted="EnCrYpTeD") in chunks


@pytest.mark.parametrize(
    ("stop", "outcome", "error"),
    [
        ("max_tokens", "max-tokens", None),
        ("refusal", "error", "the model refused to answer (stop reason 'refusal')"),
        (
            "pause_turn",
            "error",
            "the provider paused a server-tool turn (stop reason 'pause_turn'); server tools "
            "are not supported",
        ),
    ],
)
async def test_stop_reasons(
    server: LLMServer, session: Session, stop: str, outcome: str, error: str | None
) -> None:
    server.script(*[Reply(events=anthropic_events(text="partial", stop=stop))] * 3)
    model = model_for(server)
    assert await run_turn(Agent(session, model, retry=QUICK), "Go") == outcome
    await model.aclose()
    if error is None:
        reply = events_of(session, "assistant/message")[0].data
        assert (reply.finish, reply.interrupted) == ("max-tokens", True)
    else:
        assert {e.data.error for e in events_of(session, "assistant/attempt")} == {error}


async def test_an_error_event_in_the_stream_is_retried(server: LLMServer, session: Session) -> None:
    # The stream starts, then the provider reports overload inside it.
    events = anthropic_events(text="never")[:2] + anthropic_sse(
        [{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}]
    )
    server.script(Reply(events=events), Reply(events=anthropic_events(text="fine")))
    model = model_for(server)
    assert await run_turn(Agent(session, model, retry=QUICK), "Go") == "completed"
    await model.aclose()
    (attempt,) = events_of(session, "assistant/attempt")
    assert attempt.data.error == "ModelError: anthropic: error in the stream: Overloaded"
    assert events_of(session, "assistant/message")[0].data.message.text == "fine"


async def test_429_then_400(server: LLMServer) -> None:
    def error(kind: str, message: str) -> dict[str, Any]:
        return {"type": "error", "error": {"type": kind, "message": message}}

    server.script(
        Reply(body=error("rate_limit_error", "Too many"), status=429, headers={"retry-after": "3"}),
        Reply(body=error("invalid_request_error", "max_tokens: required"), status=400),
        Reply(body=error("api_error", "Internal"), status=529),
    )
    request = ModelRequest(messages=[Message.user("hi")])
    raised: list[ModelError] = []
    async with model_for(server) as model:
        for _ in range(3):
            with pytest.raises(ModelError) as caught:
                async for _chunk in model.stream(request):
                    pass
            raised.append(caught.value)
    assert [(str(e), e.retryable, e.retry_after) for e in raised] == [
        ("anthropic: HTTP 429: Too many", True, 3.0),
        ("anthropic: HTTP 400: max_tokens: required", False, None),
        ("anthropic: HTTP 529: Internal", True, None),
    ]
    assert len(server.received) == 3


async def test_a_cut_stream_and_a_missing_stop_reason_fail(server: LLMServer) -> None:
    server.script(
        Reply(events=anthropic_events(text="a long one"), cut_after=3),
        Reply(events=anthropic_events(text="no stop")[:-2]),
    )
    request = ModelRequest(messages=[Message.user("hi")])
    messages: list[str] = []
    async with model_for(server) as model:
        for _ in range(2):
            with pytest.raises(ModelError) as caught:
                async for _chunk in model.stream(request):
                    pass
            messages.append(str(caught.value))
    assert messages == [
        "anthropic: the stream broke: RemoteProtocolError: peer closed connection without "
        "sending complete message body (incomplete chunked read)",
        "anthropic: the stream ended without a stop reason",
    ]
