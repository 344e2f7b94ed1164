"""Stream assembly and the scripted model: what settles, what is dropped, how streams fail."""

from __future__ import annotations

import anyio
import pytest

from agent import (
    Assembler,
    Chunk,
    Finish,
    ModelError,
    ModelRequest,
    ReasoningDelta,
    Response,
    ScriptedModel,
    TextDelta,
    ToolCallDelta,
)
from eventlog import Message, ReasoningPart, TextPart, ToolCallPart, Usage

pytestmark = pytest.mark.anyio

CALL = [
    ToolCallDelta(index=0, id="c1", name="read", arguments='{"pa'),
    ToolCallDelta(index=0, arguments='th": "a"}'),
]


def _assemble(chunks: list[Chunk]) -> Assembler:
    assembler = Assembler("m1")
    for chunk in chunks:
        assembler.feed(chunk)
    return assembler


def test_a_normal_finish_keeps_every_block_in_stream_order() -> None:
    usage = Usage(input_tokens=5, output_tokens=7)
    assembler = _assemble(
        [
            ReasoningDelta(text="think "),
            ReasoningDelta(text="hard", signature="sig"),
            TextDelta(text="Hel"),
            TextDelta(text="lo"),
            *CALL,
            Finish(kind="tool-calls", usage=usage),
        ]
    )
    reply = assembler.settle()
    assert reply.message is not None and not reply.interrupted
    assert reply.message.content == (
        ReasoningPart(text="think hard", signature="sig"),
        TextPart(text="Hello"),
        ToolCallPart(id="c1", name="read", arguments='{"path": "a"}'),
    )
    assert reply.tool_calls == (ToolCallPart(id="c1", name="read", arguments='{"path": "a"}'),)
    assert assembler.usage == usage


def test_max_tokens_drops_tool_calls_and_keeps_visible_text() -> None:
    reply = _assemble([TextDelta(text="partial"), *CALL, Finish(kind="max-tokens")]).settle()
    assert reply.interrupted and reply.message is not None
    assert reply.message == Message(
        id="m1", role="assistant", content=(TextPart(text="partial"),), source=reply.message.source
    )
    assert reply.tool_calls == ()


def test_cancel_keeps_the_prefix_and_drops_the_half_streamed_call() -> None:
    reply = _assemble([TextDelta(text="Let me "), TextDelta(text="see"), CALL[0]]).settle(
        cancelled=True
    )
    assert reply.interrupted and reply.message is not None
    assert reply.message.text == "Let me see"
    assert reply.message.tool_calls == ()


def test_a_reasoning_only_prefix_is_kept_on_cancel() -> None:
    reply = _assemble([ReasoningDelta(text="hmm")]).settle(cancelled=True)
    assert reply.message is not None
    assert reply.message.content == (ReasoningPart(text="hmm"),)


def test_blank_text_is_not_visible() -> None:
    reply = _assemble([TextDelta(text="  \n"), *CALL]).settle(cancelled=True)
    assert reply.message is None and reply.interrupted


def test_an_error_finish_or_a_missing_finish_settles_nothing() -> None:
    assert _assemble([TextDelta(text="x"), Finish(kind="error")]).settle().message is None
    assert _assemble([TextDelta(text="x")]).settle().message is None


def test_chunks_after_the_finish_are_ignored() -> None:
    assembler = _assemble([TextDelta(text="a"), Finish(kind="stop"), TextDelta(text="b")])
    assert assembler.settle().message is not None
    assert assembler.settle().message.text == "a"  # type: ignore[union-attr]


def test_a_call_without_an_id_gets_one() -> None:
    chunks: list[Chunk] = [ToolCallDelta(index=0, name="read"), Finish(kind="tool-calls")]
    (call,) = _assemble(chunks).settle().tool_calls
    assert call.id == "m1-call-0" and call.arguments == ""


async def _collect(model: ScriptedModel, request: ModelRequest) -> list[Chunk]:
    return [chunk async for chunk in model.stream(request)]


async def test_the_scripted_model_chunks_a_response() -> None:
    model = ScriptedModel(
        [Response(text="abcdef", tool_calls=[("read", '{"p": 1}')], chunk_size=4)]
    )
    chunks = await _collect(model, ModelRequest(messages=()))
    assert chunks == [
        TextDelta(text="abcd"),
        TextDelta(text="ef"),
        ToolCallDelta(index=0, id="call-1-0", name="read", arguments='{"p"'),
        ToolCallDelta(index=0, arguments=": 1}"),
        Finish(kind="tool-calls"),
    ]
    assert len(model.requests) == 1


async def test_the_scripted_model_fails_holds_and_runs_out() -> None:
    reached, release = anyio.Event(), anyio.Event()
    model = ScriptedModel(
        [
            Response(text="abcdefgh", chunk_size=2, fail_after=2, error="overloaded"),
            Response(text="xy", chunk_size=1, hold_after=1, reached=reached, release=release),
        ]
    )
    request = ModelRequest(messages=())
    got: list[Chunk] = []
    with pytest.raises(ModelError, match="overloaded"):
        async for chunk in model.stream(request):
            got.append(chunk)  # noqa: PERF401 - keep the chunks seen before the failure
    assert got == [TextDelta(text="ab"), TextDelta(text="cd")]

    held: list[Chunk] = []

    async def consume() -> None:
        held.extend(await _collect(model, request))

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        await reached.wait()
        assert held == []
        release.set()
    assert held == [TextDelta(text="x"), TextDelta(text="y"), Finish(kind="stop")]
    with pytest.raises(ModelError, match="no response left for request 3"):
        await _collect(model, request)


def test_a_repeated_call_id_is_made_unique() -> None:
    chunks: list[Chunk] = [
        ToolCallDelta(index=0, id="dup", name="read", arguments="{}"),
        ToolCallDelta(index=1, id="dup", name="read", arguments="{}"),
        Finish(kind="tool-calls"),
    ]
    calls = _assemble(chunks).settle().tool_calls
    assert [c.id for c in calls] == ["dup", "dup-1"]
