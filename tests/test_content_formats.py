"""Content parts through the provider converters: exact shapes, refusals naming the part and the
provider, degradation on request, and any generated history validating against the official
SDKs' parameter types (``openai`` and ``anthropic``, through pydantic)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
from anthropic.types import MessageParam
from hypothesis import given
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import ResponseInputItemParam
from pydantic import BaseModel, TypeAdapter

from eventlog import (
    FilePart,
    ImagePart,
    Message,
    MessageSource,
    ReasoningPart,
    RedactedReasoningPart,
    ResultPart,
    TextPart,
    ToolCallPart,
    ValidationError,
    attachment_digest,
)
from projections import to_anthropic, to_openai, to_openai_responses

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8
PNG_DIGEST = attachment_digest(PNG)
PDF = b"%PDF-1.4 hello"

_OPENAI = TypeAdapter(list[ChatCompletionMessageParam])
_ANTHROPIC = TypeAdapter(list[MessageParam])
_RESPONSES = TypeAdapter(list[ResponseInputItemParam])


def materialised(value: Any) -> Any:
    """``value`` as plain data, draining pydantic's lazy iterators (which validate as they go:
    an ``Iterable[...]`` field is checked only when iterated)."""
    if isinstance(value, dict):
        return {key: materialised(item) for key, item in value.items()}
    if isinstance(value, BaseModel):
        return materialised(value.model_dump(exclude_unset=True))
    if isinstance(value, list | tuple) or isinstance(value, Iterator):
        return [materialised(item) for item in value]
    return value


def sdk_valid(adapter: TypeAdapter[Any], converted: list[dict[str, Any]]) -> None:
    """Fail unless ``converted`` validates against the SDK type, every key kept (a key the type
    does not know would be dropped by validation, and the comparison would show it)."""
    assert materialised(adapter.validate_python(converted)) == materialised(converted)


# -- exact shapes ------------------------------------------------------------------------------

IMAGE_REF = ImagePart(media_type="image/png", attachment=PNG_DIGEST)
IMAGE_URL = ImagePart(media_type="image/jpeg", url="https://example.com/cat.jpg")
PDF_INLINE = FilePart(media_type="application/pdf", data=PDF, filename="report.pdf")
CALL = ToolCallPart(id="c1", name="screenshot", arguments="{}")
HISTORY = (
    Message(
        id="u1",
        role="user",
        content=(TextPart(text="what is this?"), IMAGE_REF, IMAGE_URL, PDF_INLINE),
    ),
    Message(
        id="a1",
        role="assistant",
        content=(
            ReasoningPart(text="look closer", signature="sig-1", id="rs_1"),
            RedactedReasoningPart(data="opaque=="),
            TextPart(text="Taking a screenshot."),
            CALL,
        ),
        source=MessageSource(kind="model"),
    ),
    Message.tool_result("c1", (TextPart(text="here"), IMAGE_REF), id="t1"),
)
DATA_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()
PDF_B64 = base64.b64encode(PDF).decode()


def test_anthropic_gets_images_documents_signed_and_redacted_thinking() -> None:
    out = to_anthropic(HISTORY, attachments={PNG_DIGEST: PNG})
    png_block = {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": "image/png",
            "data": base64.b64encode(PNG).decode(),
        },
    }
    assert out == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                png_block,
                {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
                {
                    "type": "document",
                    "source": {"type": "base64", "media_type": "application/pdf", "data": PDF_B64},
                    "title": "report.pdf",
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "look closer", "signature": "sig-1"},
                {"type": "redacted_thinking", "data": "opaque=="},
                {"type": "text", "text": "Taking a screenshot."},
                {"type": "tool_use", "id": "c1", "name": "screenshot", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "c1",
                    "is_error": False,
                    "content": [{"type": "text", "text": "here"}, png_block],
                }
            ],
        },
    ]
    sdk_valid(_ANTHROPIC, out)


def test_openai_chat_gets_image_urls_and_files_and_refuses_a_tool_result_image() -> None:
    # An image in a tool result is something Chat Completions cannot take: refused, named.
    with pytest.raises(
        ValidationError,
        match=r"message 't1' \(tool\): OpenAI Chat Completions cannot take a ImagePart in a "
        r"tool result \(it takes text only\); pass degrade='text' or degrade='drop'",
    ):
        to_openai(HISTORY, attachments={PNG_DIGEST: PNG})
    # Asked to, it degrades the image to a text saying what was there.
    out = to_openai(HISTORY, attachments={PNG_DIGEST: PNG}, degrade="text")
    assert out[0] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": DATA_URL}},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
            {
                "type": "file",
                "file": {
                    "file_data": f"data:application/pdf;base64,{PDF_B64}",
                    "filename": "report.pdf",
                },
            },
        ],
    }
    assert out[2] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": [
            {"type": "text", "text": "here"},
            {"type": "text", "text": f"[image: image/png, {PNG_DIGEST}]"},
        ],
    }
    sdk_valid(_OPENAI, out)
    # ... or drops it.
    dropped = to_openai(HISTORY, attachments={PNG_DIGEST: PNG}, degrade="drop")
    assert dropped[2]["content"] == [{"type": "text", "text": "here"}]


def test_openai_responses_gets_reasoning_items_calls_and_rich_outputs() -> None:
    out = to_openai_responses(HISTORY, attachments={PNG_DIGEST: PNG})
    assert out[1:] == [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "look closer"}],
            "encrypted_content": "sig-1",
        },
        {"type": "message", "role": "assistant", "content": "Taking a screenshot."},
        {"type": "function_call", "call_id": "c1", "name": "screenshot", "arguments": "{}"},
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": [
                {"type": "input_text", "text": "here"},
                {"type": "input_image", "image_url": DATA_URL, "detail": "auto"},
            ],
        },
    ]
    assert out[0]["content"][1] == {"type": "input_image", "image_url": DATA_URL, "detail": "auto"}
    sdk_valid(_RESPONSES, out)


def test_an_attachment_that_was_not_loaded_is_named() -> None:
    for convert in (to_openai, to_anthropic, to_openai_responses):
        with pytest.raises(ValidationError, match=f"attachment {PNG_DIGEST} is not loaded"):
            convert(HISTORY[:1])


def test_anthropic_refuses_a_media_type_it_cannot_read_unless_told() -> None:
    tiff = Message(id="u", role="user", content=(ImagePart(media_type="image/tiff", data=b"II*"),))
    with pytest.raises(
        ValidationError,
        match=r"message 'u' \(user\): Anthropic Messages cannot take a ImagePart of media type "
        r"'image/tiff'",
    ):
        to_anthropic([tiff])
    assert to_anthropic([tiff], degrade="text") == [
        {"role": "user", "content": [{"type": "text", "text": "[image: image/tiff, 3 bytes]"}]}
    ]


def test_a_media_part_holds_exactly_one_source() -> None:
    with pytest.raises(ValueError, match="exactly one of data, url or attachment, got none"):
        ImagePart(media_type="image/png")
    with pytest.raises(ValueError, match="got \\['data', 'url'\\]"):
        FilePart(media_type="application/pdf", data=b"x", url="https://x")
    with pytest.raises(ValueError, match="must be 'sha256:' and 64 lowercase hex"):
        ImagePart(media_type="image/png", attachment="md5:abc")


# -- any history validates against the SDKs ---------------------------------------------------

_texts = st.text(min_size=1, max_size=12)
_images = st.one_of(
    st.builds(
        ImagePart,
        media_type=st.sampled_from(["image/png", "image/jpeg"]),
        data=st.binary(max_size=16),
    ),
    st.builds(
        ImagePart, media_type=st.just("image/webp"), url=st.just("https://example.com/i.webp")
    ),
    st.just(IMAGE_REF),
)
_files = st.one_of(
    st.builds(
        FilePart,
        media_type=st.just("application/pdf"),
        data=st.binary(max_size=16),
        filename=st.none() | _texts,
    ),
    st.builds(FilePart, media_type=st.just("text/plain"), data=st.just(b"plain words")),
)
_user_parts = st.lists(
    st.one_of(st.builds(TextPart, text=_texts), _images, _files), min_size=1, max_size=4
)
_reasoning = st.one_of(
    st.builds(ReasoningPart, text=_texts, signature=st.none() | _texts, id=st.none() | _texts),
    st.builds(RedactedReasoningPart, data=_texts),
)
_result_content: st.SearchStrategy[str | tuple[ResultPart, ...]] = st.one_of(
    st.text(max_size=12),
    st.lists(st.one_of(st.builds(TextPart, text=_texts), _images), min_size=1, max_size=3).map(
        tuple
    ),
)


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    """Balanced histories: user turns with media, assistant steps with reasoning (signed,
    unsigned, redacted) and tool calls, each answered by a text or rich result."""
    out: list[Message] = []
    for turn in range(draw(st.integers(1, 3))):
        out.append(Message(id=f"u{turn}", role="user", content=tuple(draw(_user_parts))))
        for step in range(draw(st.integers(1, 2))):
            calls = [
                ToolCallPart(
                    id=f"c{turn}-{step}-{n}",
                    name="tool",
                    arguments=draw(st.sampled_from(["{}", '{"a": 1}', ""])),
                )
                for n in range(draw(st.integers(0, 2)))
            ]
            reasoning = draw(st.lists(_reasoning, max_size=2))
            text = draw(st.lists(st.builds(TextPart, text=_texts), max_size=1))
            out.append(
                Message(id=f"a{turn}-{step}", role="assistant", content=(*reasoning, *text, *calls))
            )
            out.extend(
                Message.tool_result(
                    call.id, draw(_result_content), is_error=draw(st.booleans()), id=f"t-{call.id}"
                )
                for call in calls
            )
            if not calls:
                break
    return out


@given(histories())
def test_any_history_converts_to_what_each_sdk_accepts(history: list[Message]) -> None:
    attachments = {PNG_DIGEST: PNG}
    sdk_valid(_ANTHROPIC, to_anthropic(history, attachments=attachments))
    sdk_valid(_RESPONSES, to_openai_responses(history, attachments=attachments))
    # Chat Completions takes no image in a tool result: with degrade it still validates.
    sdk_valid(_OPENAI, to_openai(history, attachments=attachments, degrade="text"))
    sdk_valid(_OPENAI, to_openai(history, attachments=attachments, degrade="drop"))
