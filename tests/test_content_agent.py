"""Rich content through the agent loop and the real provider SDKs, against the loopback server.

Images the log holds by attachment reference reach the provider as its own image blocks, with
the stored bytes; tools return images, stored as attachments before their result is committed;
redacted and signed thinking go back exactly as they came; cache writes are counted. Each test
checks what the agent logged and the exact JSON the server received.
"""

from __future__ import annotations

import base64
import sqlite3
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent import Agent, Response, RetryPolicy, ScriptedModel, tool
from agent.models import AnthropicMessages, OpenAIChat
from eventlog import (
    AttachmentNotFoundError,
    CorruptLogError,
    ImagePart,
    Message,
    MessageSource,
    ReasoningPart,
    RedactedReasoningPart,
    Session,
    Store,
    TextPart,
    ToolCallPart,
    Usage,
    ValidationError,
    attachment_digest,
    open_store,
)
from recovery.testing import check_invariants
from tests.agent_children.support import events_of, kill_once_it_says
from tests.llm_server import (
    LLMServer,
    Reply,
    anthropic_events,
    openai_chunk,
    openai_events,
    openai_sse,
)

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent
#: A PNG signature and some bytes: no provider decodes it here, every byte must arrive.
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 3
CHART = b"\x89PNG\r\n\x1a\n" + bytes(reversed(range(256))) * 2
PNG_B64 = base64.b64encode(PNG).decode()
CHART_B64 = base64.b64encode(CHART).decode()


@pytest.fixture
def server() -> Iterator[LLMServer]:
    with LLMServer() as server:
        yield server


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with open_store(f"sqlite:///{tmp_path}/content.db") as store:
        yield store


def image_message(digest: str) -> Message:
    return Message(
        id="m-image",
        role="user",
        content=(
            TextPart(text="What is this?"),
            ImagePart(media_type="image/png", attachment=digest),
        ),
        source=MessageSource(kind="user"),
    )


def openai_for(server: LLMServer, **options: Any) -> OpenAIChat:
    return OpenAIChat("test-model", base_url=server.url + "/v1", api_key="test", **options)


def anthropic_for(server: LLMServer) -> AnthropicMessages:
    return AnthropicMessages("claude-test", base_url=server.url, api_key="sk-ant")


@tool
def chart(name: str) -> list[TextPart | ImagePart]:
    """Draw a chart."""
    return [TextPart(text=f"chart {name}:"), ImagePart(media_type="image/png", data=CHART)]


async def run_turn(agent: Agent, message: str | Message) -> str:
    agent.followup(message)
    with anyio.fail_after(20):
        (outcome,) = await agent.run_until_idle()
    return outcome.reason


# -- images the user sends, by attachment reference ---------------------------------------------


async def test_an_attached_image_reaches_openai_as_a_data_url(
    server: LLMServer, store: Store
) -> None:
    # The image is stored once; the user message references it by digest only.
    session = await store.create(session_id="s")
    digest = await store.put_attachment(PNG)
    server.script(Reply(events=openai_events(text="A test pattern.")))
    async with openai_for(server) as model:
        agent = Agent(session, model, store=store)
        assert await run_turn(agent, image_message(digest)) == "completed"
    # The log keeps the reference, not the bytes.
    (logged,) = events_of(session, "user/message")
    assert logged.data.message.content[1] == ImagePart(media_type="image/png", attachment=digest)
    # The server received the image as an image_url part holding the stored bytes.
    assert server.bodies[0]["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
            ],
        }
    ]


async def test_an_attached_image_reaches_anthropic_as_a_base64_source(
    server: LLMServer, store: Store
) -> None:
    session = await store.create(session_id="s")
    digest = await store.put_attachment(PNG)
    server.script(Reply(events=anthropic_events(text="A test pattern.")))
    async with anthropic_for(server) as model:
        agent = Agent(session, model, store=store)
        assert await run_turn(agent, image_message(digest)) == "completed"
    (sent,) = server.bodies[0]["messages"]
    assert sent == {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is this?"},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64},
            },
        ],
    }
    assert base64.b64decode(sent["content"][1]["source"]["data"]) == PNG


async def test_a_missing_attachment_names_the_digest_and_the_event(
    server: LLMServer, store: Store
) -> None:
    # The message references bytes the store never received.
    session = await store.create(session_id="s")
    digest = attachment_digest(b"never stored")
    async with openai_for(server) as model:
        agent = Agent(session, model, store=store)
        agent.followup(image_message(digest))
        with pytest.raises(AttachmentNotFoundError) as caught:
            await agent.run_until_idle()
    (user,) = events_of(session, "user/message")
    assert caught.value.seq == user.seq
    assert caught.value.session_id == "s"
    assert str(caught.value) == (
        f"session 's', seq {user.seq}: attachment {digest} is not stored; the request that "
        "needs it was not sent (hint: store its bytes with store.put_attachment)"
    )
    # Nothing reached the server, no attempt was logged, and the turn is closed.
    assert server.received == []
    assert events_of(session, "assistant/attempt") == []
    assert [e.data.reason for e in events_of(session, "turn/end")] == ["error"]
    check_invariants(session)


async def test_an_image_is_read_once_while_the_history_references_it(
    server: LLMServer, store: Store, tmp_path: Path
) -> None:
    session = await store.create(session_id="s")
    digest = await store.put_attachment(PNG)

    @tool
    def tamper() -> str:
        """Alter the stored image behind the store's back (a side door into the file)."""
        with sqlite3.connect(tmp_path / "content.db") as side:
            side.execute("UPDATE attachments SET data = ? WHERE digest = ?", (b"evil", digest))
        return "done"

    server.script(
        Reply(events=openai_events(calls=[("call_1", "tamper", "{}")])),
        Reply(events=openai_events(text="Still the same picture.")),
    )
    # Step 1 reads the image; its tool alters the stored bytes; step 2 sends it again.
    async with openai_for(server) as model:
        agent = Agent(session, model, [tamper], store=store)
        assert await run_turn(agent, image_message(digest)) == "completed"
    image_part = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}}
    # Both requests carry the bytes read the first time: the second did not read the store.
    assert [body["messages"][0]["content"][1] for body in server.bodies] == [image_part] * 2
    # A new agent reads it afresh, and the alteration is caught, naming the event.
    (user,) = events_of(session, "user/message")
    async with openai_for(server) as model:
        fresh = Agent(session, model, [tamper], store=store)
        fresh.followup("Again?")
        with pytest.raises(CorruptLogError) as caught:
            await fresh.run_until_idle()
    assert caught.value.seq == user.seq
    assert str(caught.value).startswith(f"session 's', seq {user.seq}: attachment {digest} was")
    assert len(server.received) == 2


# -- tools that return images -------------------------------------------------------------------


async def test_without_a_store_a_tool_image_stays_inline(session: Session) -> None:
    # An agent given no store keeps the tool's bytes in the result event itself.
    model = ScriptedModel([Response(tool_calls=[("chart", '{"name": "q1"}')]), Response(text="ok")])
    agent = Agent(session, model, [chart])
    assert await run_turn(agent, "Chart Q1.") == "completed"
    (result,) = events_of(session, "tool/result")
    assert result.data.message.tool_results[0].content == (
        TextPart(text="chart q1:"),
        ImagePart(media_type="image/png", data=CHART),
    )
    # The scripted model's second request holds the image as the tool returned it.
    assert model.requests[1].messages[-1] == result.data.message


async def test_a_tool_image_is_stored_and_reaches_anthropic_in_its_tool_result(
    server: LLMServer, store: Store
) -> None:
    server.script(
        Reply(events=anthropic_events(calls=[("toolu_1", "chart", '{"name": "sales"}')])),
        Reply(events=anthropic_events(text="Sales go up.")),
    )
    session = await store.create(session_id="s")
    async with anthropic_for(server) as model:
        agent = Agent(session, model, [chart], store=store)
        assert await run_turn(agent, "Chart the sales.") == "completed"
    # The result was committed with a reference; the bytes are in the store under it.
    digest = attachment_digest(CHART)
    (result,) = events_of(session, "tool/result")
    assert result.data.message.tool_results[0].content == (
        TextPart(text="chart sales:"),
        ImagePart(media_type="image/png", attachment=digest),
    )
    assert await store.get_attachment(digest) == CHART
    # The second request carries the image inside the tool_result block.
    assert server.bodies[1]["messages"][-1] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "is_error": False,
                "content": [
                    {"type": "text", "text": "chart sales:"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": CHART_B64},
                    },
                ],
            }
        ],
    }


async def test_a_tool_image_that_cannot_be_stored_becomes_an_error_result(
    server: LLMServer, store: Store, tmp_path: Path
) -> None:
    # The SQLite file refuses every new attachment (a trigger added through a side door).
    await store.put_attachment(PNG)
    with sqlite3.connect(tmp_path / "content.db") as side:
        side.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON attachments "
            "BEGIN SELECT RAISE(ABORT, 'no room for attachments'); END"
        )
    server.script(
        Reply(events=anthropic_events(calls=[("toolu_1", "chart", '{"name": "sales"}')])),
        Reply(events=anthropic_events(text="The chart failed.")),
    )
    session = await store.create(session_id="s")
    async with anthropic_for(server) as model:
        agent = Agent(session, model, [chart], store=store)
        assert await run_turn(agent, "Chart the sales.") == "completed"
    # The result never references bytes that are not stored: it is an error saying why.
    (result,) = events_of(session, "tool/result")
    assert result.data.error is not None
    assert (result.data.error.name, result.data.error.code) == (
        "StoreWriteError",
        "CHECKPOINT_FAILED",
    )
    part = result.data.message.tool_results[0]
    assert part.is_error
    assert isinstance(part.content, str)
    assert part.content.startswith(
        "the tool's result was dropped: its attachments could not be stored ("
    )
    assert "no room for attachments" in part.content
    assert server.bodies[1]["messages"][-1]["content"][0]["content"] == part.content


async def test_a_tool_image_is_refused_by_openai_chat(server: LLMServer, store: Store) -> None:
    # Chat Completions takes no image in a tool message: the request is refused before sending.
    server.script(Reply(events=openai_events(calls=[("call_1", "chart", '{"name": "sales"}')])))
    session = await store.create(session_id="s")
    async with openai_for(server) as model:
        agent = Agent(session, model, [chart], store=store, retry=RetryPolicy(max_retries=3))
        agent.followup("Chart the sales.")
        with pytest.raises(ValidationError) as caught:
            await agent.run_until_idle()
    (result,) = events_of(session, "tool/result")
    assert str(caught.value) == (
        f"message {result.data.message.id!r} (tool): OpenAI Chat Completions cannot take a "
        "ImagePart in a tool result (it takes text only); pass degrade='text' or "
        "degrade='drop' to send it otherwise"
    )
    # One request went out (the first step); the refused one was neither sent nor logged.
    assert len(server.received) == 1
    types = [e.type for e in await session.events(result.seq + 1)]
    assert types == ["step/end", "step/start", "step/end", "turn/end"]
    assert session.window().event(session.head).data.reason == "error"
    check_invariants(session)


async def test_a_tool_image_is_degraded_to_text_for_openai_chat_when_asked(
    server: LLMServer, store: Store
) -> None:
    server.script(
        Reply(events=openai_events(calls=[("call_1", "chart", '{"name": "sales"}')])),
        Reply(events=openai_events(text="Sales go up.")),
    )
    session = await store.create(session_id="s")
    async with openai_for(server, degrade="text") as model:
        agent = Agent(session, model, [chart], store=store)
        assert await run_turn(agent, "Chart the sales.") == "completed"
    # The log keeps the image; only what was sent stands in for it.
    digest = attachment_digest(CHART)
    assert server.bodies[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": [
            {"type": "text", "text": "chart sales:"},
            {"type": "text", "text": f"[image: image/png, {digest}]"},
        ],
    }


# -- reasoning sent back exactly -----------------------------------------------------------------


def _thinking_reply() -> list[dict[str, Any]]:
    """Two signed thinking blocks around a redacted one, then a tool_use (Anthropic's order),
    with cache reads and writes."""
    return anthropic_events(
        reasoning=[("First, the chart.", "sig-one"), "ReDaCtEd+/==", ("Then draw it.", "sig-two")],
        calls=[("toolu_1", "chart", '{"name": "q3"}')],
        input_tokens=30,
        output_tokens=40,
        cache_read=4,
        cache_write=11,
        size=7,
    )


async def test_redacted_and_signed_thinking_round_trip_exactly(
    server: LLMServer, store: Store, tmp_path: Path
) -> None:
    server.script(
        Reply(events=_thinking_reply()), Reply(events=anthropic_events(text="Here it is."))
    )
    session = await store.create(session_id="s")
    async with anthropic_for(server) as model:
        agent = Agent(session, model, [chart], store=store)
        assert await run_turn(agent, "Chart Q3.") == "completed"
    # Each block is its own part: the redacted one verbatim, each signed one with its signature.
    content = (
        ReasoningPart(text="First, the chart.", signature="sig-one"),
        RedactedReasoningPart(data="ReDaCtEd+/=="),
        ReasoningPart(text="Then draw it.", signature="sig-two"),
        ToolCallPart(id="toolu_1", name="chart", arguments='{"name": "q3"}'),
    )
    first = events_of(session, "assistant/message")[0]
    assert first.data.message.content == content
    # Cache reads and writes are both counted.
    assert first.data.usage == Usage(
        input_tokens=30, output_tokens=40, cache_read_tokens=4, cache_write_tokens=11
    )
    # It is logged: a reader of the stored file sees the same parts.
    await session.flush()
    async with open_store(f"sqlite:///{tmp_path}/content.db") as reader:
        stored = [e async for e in reader.read("s", from_seq=first.seq, limit=1)]
    assert stored[0].data.message.content == content
    # And sent back unchanged, in order, before the tool_use.
    assert server.bodies[1]["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "First, the chart.", "signature": "sig-one"},
        {"type": "redacted_thinking", "data": "ReDaCtEd+/=="},
        {"type": "thinking", "thinking": "Then draw it.", "signature": "sig-two"},
        {"type": "tool_use", "id": "toolu_1", "name": "chart", "input": {"name": "q3"}},
    ]


async def test_a_signed_thinking_block_with_its_text_omitted_is_kept(
    server: LLMServer, store: Store
) -> None:
    # A provider may omit the thinking text and send only the signature: it still must go back.
    server.script(
        Reply(
            events=anthropic_events(
                reasoning=[("", "sig-omitted")], calls=[("toolu_1", "chart", '{"name": "q4"}')]
            )
        ),
        Reply(events=anthropic_events(text="Done.")),
    )
    session = await store.create(session_id="s")
    async with anthropic_for(server) as model:
        agent = Agent(session, model, [chart], store=store)
        assert await run_turn(agent, "Chart Q4.") == "completed"
    first = events_of(session, "assistant/message")[0]
    assert first.data.message.content == (
        ReasoningPart(text="", signature="sig-omitted"),
        ToolCallPart(id="toolu_1", name="chart", arguments='{"name": "q4"}'),
    )
    assert server.bodies[1]["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "",
        "signature": "sig-omitted",
    }


async def test_openai_cache_writes_are_counted(server: LLMServer, store: Store) -> None:
    # An OpenAI-compatible proxy of a prompt-caching model reports writes in the prompt details.
    usage = {
        "prompt_tokens": 50,
        "completion_tokens": 3,
        "total_tokens": 53,
        "prompt_tokens_details": {"cached_tokens": 20, "cache_write_tokens": 25},
    }
    chunks = [openai_chunk({"content": "ok"}), openai_chunk({}, finish_reason="stop")]
    server.script(Reply(events=openai_sse([*chunks, openai_chunk(usage=usage)])))
    session = await store.create(session_id="s")
    async with openai_for(server) as model:
        assert await run_turn(Agent(session, model, store=store), "hi") == "completed"
    (reply,) = events_of(session, "assistant/message")
    assert reply.data.usage == Usage(
        input_tokens=50, output_tokens=3, cache_read_tokens=20, cache_write_tokens=25
    )


# -- a crash and a resume keep sending the images ------------------------------------------------


async def _resume_and_ask(url: str, server: LLMServer) -> list[str]:
    """Resume the killed session (its store passed on to the agent) and run one more turn;
    the reasons of its turns."""
    async with open_store(url) as store, openai_for(server) as model:
        agent = await Agent.resume(store, "s", model)
        await run_turn(agent, "And now?")
        return [e.data.reason for e in events_of(agent.session, "turn/end")]


def test_a_crash_and_resume_keeps_sending_the_images(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/crash.db"
    image = tmp_path / "image.png"
    image.write_bytes(PNG)
    with LLMServer() as server:
        server.script(
            Reply(events=openai_events(calls=[("call_1", "inspect", "{}")])),
            Reply(events=openai_events(text="A test pattern, and the tool never answered.")),
        )
        # A child sends the image, then is killed inside the tool body.
        command = [sys.executable, "-m", "tests.agent_children.image_child", url, "s"]
        kill_once_it_says([*command, server.url, str(image)], "started", cwd=ROOT)  # in the body
        # A new process (here: this one) resumes and runs another turn.
        outcomes = anyio.run(_resume_and_ask, url, server)
    assert outcomes == ["interrupted", "completed"]
    # The resumed request still carries the image's bytes, read from the store again.
    first, resumed = server.bodies
    image_part = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}}
    assert first["messages"][0]["content"][1] == image_part
    assert resumed["messages"][0] == {
        "role": "user",
        "content": [{"type": "text", "text": "What is this?"}, image_part],
    }
    # The call the kill cut short is answered as of unknown outcome, then the new prompt.
    assert resumed["messages"][2]["tool_call_id"] == "call_1"
    assert resumed["messages"][2]["content"].startswith(
        "The tool call inspect (id call_1) was interrupted: the process stopped after the call "
        "started"
    )
    assert resumed["messages"][3] == {"role": "user", "content": "And now?"}
