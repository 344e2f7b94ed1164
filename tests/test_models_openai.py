"""``OpenAIChat`` through the real ``openai`` SDK against the loopback provider server.

Each test scripts the server's replies in the Chat Completions wire format, runs the agent,
and checks both what the agent logged and the exact JSON the server received.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from agent import (
    Agent,
    Chunk,
    ModelError,
    ModelRequest,
    ReasoningDelta,
    RetryPolicy,
    ToolCallDelta,
    tool,
)
from agent.models import OpenAIChat
from eventlog import Message, Session, Usage
from tests.agent_children.support import events_of
from tests.llm_server import LLMServer, Reply, openai_chunk, openai_events, openai_sse

pytestmark = pytest.mark.anyio

#: The default back-off scaled down 500 times, so tests that retry do not wait for long.
QUICK = RetryPolicy(initial_delay=0.001, max_delay=0.016)
USAGE = {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}


@tool(safe=True)
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@pytest.fixture
def server() -> Iterator[LLMServer]:
    with LLMServer() as server:
        yield server


def model_for(server: LLMServer, **options: Any) -> OpenAIChat:
    return OpenAIChat("test-model", base_url=f"{server.url}/v1", api_key="sk-test", **options)


async def run_turn(session: Session, model: OpenAIChat, text: str, **options: Any) -> str:
    options.setdefault("retry", QUICK)
    agent = Agent(session, model, [weather], system="Be brief.", **options)
    agent.followup(text)
    with anyio.fail_after(20):
        (outcome,) = await agent.run_until_idle()
    await model.aclose()
    return outcome.reason


def types(session: Session) -> list[str]:
    return [e.type for e in session.window(0)]


async def test_a_tool_turn_with_llama_cpp_quirks(server: LLMServer, session: Session) -> None:
    # The server repeats the call's id and name on every delta (llama.cpp), arguments in pieces.
    server.script(
        Reply(
            events=openai_events(
                calls=[("call_a", "weather", '{"city": "Paris"}')], repeat_ids=True, size=4
            )
        ),
        Reply(events=openai_events(text="It is sunny in Paris.", usage=USAGE)),
    )
    assert await run_turn(session, model_for(server), "Weather in Paris?") == "completed"
    # The call was assembled once, with its full arguments, and answered.
    first = events_of(session, "assistant/message")[0].data
    (call,) = first.message.tool_calls
    assert (call.id, call.name, call.arguments) == ("call_a", "weather", '{"city": "Paris"}')
    assert first.finish == "tool-calls"
    final = events_of(session, "assistant/message")[1].data
    assert final.message.text == "It is sunny in Paris."
    assert final.usage == Usage(input_tokens=12, output_tokens=7)
    # The first request: system prompt, user message, the tool, streaming with usage.
    body = server.bodies[0]
    assert body == {
        "model": "test-model",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "weather",
                    "description": "The weather in a city.",
                    "parameters": weather.parameters,
                },
            }
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    # The second request sends the call back with content "" (llama.cpp refuses null).
    assert server.bodies[1]["messages"][2:] == [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "sunny in Paris"},
    ]
    assert server.received[0].path == "/v1/chat/completions"
    assert server.received[0].headers["authorization"] == "Bearer sk-test"


async def test_parallel_calls_interleaved_and_without_ids(
    server: LLMServer, session: Session
) -> None:
    # Two calls whose deltas interleave by index; the second comes without an id.
    chunks = [
        openai_chunk({"tool_calls": [{"index": 0, "id": "c0", "function": {"name": "weather"}}]}),
        openai_chunk({"tool_calls": [{"index": 1, "function": {"name": "weather"}}]}),
        openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}),
        openai_chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"city": "Oslo"}'}}]}),
        openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": ' "Rome"}'}}]}),
        openai_chunk({}, finish_reason="tool_calls"),
    ]
    server.script(Reply(events=openai_sse(chunks)), Reply(events=openai_events(text="Done.")))
    assert await run_turn(session, model_for(server), "Rome and Oslo?") == "completed"
    calls = events_of(session, "assistant/message")[0].data.message.tool_calls
    assert [(c.name, c.arguments) for c in calls] == [
        ("weather", '{"city": "Rome"}'),
        ("weather", '{"city": "Oslo"}'),
    ]
    assert calls[0].id == "c0" and calls[1].id not in ("", "c0")  # the agent made one up
    results = [e.data.message.content[0] for e in events_of(session, "tool/result")]
    assert [(r.call_id, r.content) for r in results] == [
        (calls[0].id, "sunny in Rome"),
        (calls[1].id, "sunny in Oslo"),
    ]
    # Both results went back, paired by id.
    sent = server.bodies[1]["messages"]
    assert [m.get("tool_call_id") for m in sent[3:]] == [calls[0].id, calls[1].id]


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
async def test_reasoning_deltas_are_kept(server: LLMServer, session: Session, key: str) -> None:
    # DeepSeek sends reasoning_content, vLLM and OpenRouter reasoning; DeepSeek's cache hits.
    usage = USAGE | {"prompt_cache_hit_tokens": 8}
    server.script(
        Reply(
            events=openai_events(
                reasoning="Think first.", reasoning_key=key, text="42", usage=usage
            )
        )
    )
    assert await run_turn(session, model_for(server), "Answer?") == "completed"
    reply = events_of(session, "assistant/message")[0].data
    assert [type(p).__name__ for p in reply.message.content] == ["ReasoningPart", "TextPart"]
    assert reply.message.content[0].text == "Think first."
    assert reply.usage == Usage(input_tokens=12, output_tokens=7, cache_read_tokens=8)


async def test_openai_cached_and_reasoning_token_counts(server: LLMServer) -> None:
    usage = USAGE | {
        "prompt_tokens_details": {"cached_tokens": 5},
        "completion_tokens_details": {"reasoning_tokens": 3},
    }
    server.script(Reply(events=openai_events(text="ok", usage=usage)))
    async with model_for(server) as model:
        chunks = [c async for c in model.stream(ModelRequest(messages=[Message.user("hi")]))]
    assert chunks[-1].usage == Usage(  # type: ignore[union-attr]
        input_tokens=12, output_tokens=7, cache_read_tokens=5, reasoning_tokens=3
    )


async def test_a_stream_cut_in_the_middle_is_retried(server: LLMServer, session: Session) -> None:
    # The first stream drops its connection after three events; the retry succeeds.
    server.script(
        Reply(events=openai_events(text="a long reply that breaks"), cut_after=3),
        Reply(events=openai_events(text="whole")),
    )
    assert await run_turn(session, model_for(server), "Go") == "completed"
    (attempt,) = events_of(session, "assistant/attempt")
    assert attempt.data.error == (
        "ModelError: openai: APIConnectionError: Connection error. (peer closed connection "
        "without sending complete message body (incomplete chunked read))"
    )
    assert events_of(session, "assistant/message")[0].data.message.text == "whole"
    assert server.bodies[0] == server.bodies[1]  # the same request, sent again


async def test_429_with_retry_after_then_success(server: LLMServer, session: Session) -> None:
    overloaded = {"error": {"message": "Rate limit reached", "type": "rate_limit"}}
    server.script(
        Reply(body=overloaded, status=429, headers={"retry-after": "0.01"}),
        Reply(events=openai_events(text="fine")),
    )
    assert await run_turn(session, model_for(server), "Go") == "completed"
    (attempt,) = events_of(session, "assistant/attempt")
    assert attempt.data.error == "ModelError: openai: HTTP 429: Rate limit reached"
    assert len(server.received) == 2  # the SDK's own retries are off: one attempt, one request


async def test_the_adapter_reports_retry_after_and_status(server: LLMServer) -> None:
    server.script(
        Reply(body={"error": {"message": "slow down"}}, status=429, headers={"retry-after": "7"}),
        Reply(body={"error": {"message": "boom"}}, status=503, headers={"retry-after-ms": "250"}),
        Reply(body={"error": {"message": "bad tools"}}, status=400),
    )
    request = ModelRequest(messages=[Message.user("hi")])
    async with model_for(server) as model:
        raised = []
        for _ in range(3):
            with pytest.raises(ModelError) as caught:
                async for _chunk in model.stream(request):
                    pass
            raised.append(caught.value)
    assert [(e.status, e.retryable, e.retry_after) for e in raised] == [
        (429, True, 7.0),
        (503, True, 0.25),
        (400, False, None),
    ]


async def test_a_400_is_not_retried_and_names_the_provider_message(
    server: LLMServer, session: Session
) -> None:
    refused = {"error": {"message": "'messages' must not be empty", "type": "invalid_request"}}
    server.script(Reply(body=refused, status=400))
    assert (
        await run_turn(session, model_for(server), "Go", retry=RetryPolicy(max_retries=3))
        == "error"
    )
    (attempt,) = events_of(session, "assistant/attempt")
    assert attempt.data.error == "ModelError: openai: HTTP 400: 'messages' must not be empty"
    assert len(server.received) == 1


async def test_a_server_slower_than_the_timeout_fails_the_attempt(
    server: LLMServer, session: Session
) -> None:
    # The first reply starts after 30 s; the attempt gives up after 0.2 s and is retried.
    server.script(
        Reply(events=openai_events(text="late"), delay=30),
        Reply(events=openai_events(text="on time")),
    )
    model = model_for(server, timeout=0.2)
    assert await run_turn(session, model, "Go") == "completed"
    (attempt,) = events_of(session, "assistant/attempt")
    assert attempt.data.error == "ModelError: openai: APITimeoutError: Request timed out."
    assert events_of(session, "assistant/message")[0].data.message.text == "on time"


@pytest.mark.parametrize(
    ("reason", "outcome", "finish"),
    [("length", "max-tokens", "max-tokens"), ("content_filter", "error", None)],
)
async def test_finish_reasons(
    server: LLMServer, session: Session, reason: str, outcome: str, finish: str | None
) -> None:
    server.script(*[Reply(events=openai_events(text="partial", finish=reason))] * 3)
    assert await run_turn(session, model_for(server), "Go") == outcome
    if finish is not None:
        reply = events_of(session, "assistant/message")[0].data
        assert (reply.finish, reply.interrupted, reply.message.text) == (finish, True, "partial")
    else:  # an unknown reason fails the attempt, naming it; the retries fail alike
        errors = {e.data.error for e in events_of(session, "assistant/attempt")}
        assert errors == {"finish reason 'content_filter'"}


async def test_a_stream_without_a_finish_reason_fails(server: LLMServer, session: Session) -> None:
    server.script(*[Reply(events=openai_sse([openai_chunk({"content": "hm"})]))] * 3)
    assert await run_turn(session, model_for(server), "Go") == "error"
    errors = {e.data.error for e in events_of(session, "assistant/attempt")}
    assert errors == {"ModelError: openai: the stream ended without a finish reason"}


async def test_cancelling_closes_the_http_response(server: LLMServer, session: Session) -> None:
    # The server holds the stream after two events; the agent is cancelled there.
    held = Reply(events=openai_events(text="never finished", size=4), hold_after=3)
    server.script(held)
    model = model_for(server)
    agent = Agent(session, model, [weather])
    shown = anyio.Event()
    text: list[str] = []

    def show(chunk: Chunk) -> None:
        text.append(getattr(chunk, "text", ""))
        if "".join(text) == "never fi":  # all that was sent before the hold
            shown.set()

    agent.on_chunk(show)
    agent.followup("Go")
    async with anyio.create_task_group() as tg:
        tg.start_soon(agent.run_until_idle)
        with anyio.fail_after(10):
            await shown.wait()
        assert held.reached.is_set() and not held.disconnected.is_set()
        agent.cancel()
    # The server saw the client go away: the response was closed, not left open.
    assert await anyio.to_thread.run_sync(held.disconnected.wait, 10)
    assert (
        types(session)[-1] == "turn/end"
        and events_of(session, "turn/end")[0].data.reason == "aborted"
    )
    reply = events_of(session, "assistant/message")[0].data
    assert reply.interrupted and reply.message.text == "never fi"
    await model.aclose()


async def test_repeated_ids_reach_the_stream_once(server: LLMServer) -> None:
    server.script(
        Reply(
            events=openai_events(
                calls=[("c1", "weather", '{"city": "Lima"}')], repeat_ids=True, size=3
            )
        )
    )
    async with model_for(server) as model:
        chunks = [c async for c in model.stream(ModelRequest(messages=[Message.user("hi")]))]
    deltas = [c for c in chunks if isinstance(c, ToolCallDelta)]
    assert [(d.id, d.name) for d in deltas][:2] == [("c1", "weather"), (None, None)]
    assert all(d.id is None and d.name is None for d in deltas[1:])
    assert "".join(d.arguments for d in deltas) == '{"city": "Lima"}'
    assert not any(isinstance(c, ReasoningDelta) for c in chunks)


def test_importing_the_adapters_imports_no_sdk() -> None:
    # The SDKs are optional extras: agent.models imports them only when an adapter is built.
    code = "import sys, agent.models; print(sorted({'openai', 'anthropic'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "[]\n"
