"""``AnthropicMessages``: the Messages API streamed through the official ``anthropic`` SDK.

The request body is :func:`projections.anthropic_request`'s, plus ``stream``. The raw stream
events map to chunks: ``text_delta`` → text, ``thinking_delta`` and ``signature_delta`` →
reasoning with its signature (so a thinking block can be sent back unchanged),
``redacted_thinking`` → a reasoning delta carrying the opaque data, ``tool_use`` and its
``input_json_delta`` pieces → tool-call deltas keyed by the content block's index.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Self

from eventlog import Usage
from projections import anthropic_request

from ..model import (
    Chunk,
    Finish,
    FinishKind,
    ModelError,
    ModelRequest,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
)
from ._errors import provider_errors

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

__all__ = ("AnthropicMessages",)

_STOP: dict[str, FinishKind] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool-calls",
    "max_tokens": "max-tokens",
    "model_context_window_exceeded": "max-tokens",
}
_WHY = {
    "refusal": "the model refused to answer (stop reason 'refusal')",
    "pause_turn": "the provider paused a server-tool turn (stop reason 'pause_turn'); server "
    "tools are not supported",
}


class AnthropicMessages:
    """A :class:`~agent.Model` over the Anthropic Messages API (needs the ``anthropic`` extra).

    :param model: the model name sent when the request names none (``ModelRequest.model`` wins).
    :param client: a ready ``AsyncAnthropic``; the caller keeps owning it. Without one, a client
        is made from ``base_url`` and ``api_key`` and closed by :meth:`aclose`.
    :param timeout: seconds an attempt may wait for the server (to connect, and between bytes
        of the stream) before it fails, retryably.
    :raises ImportError: the ``anthropic`` package is not installed.

    Errors and retries as :class:`~agent.models.OpenAIChat`; an ``error`` event inside the
    stream (``overloaded_error``) is retryable. Stop reasons ``end_turn`` and ``stop_sequence``
    finish ``stop``, ``tool_use`` ``tool-calls``, ``max_tokens`` ``max-tokens``; ``refusal``
    and ``pause_turn`` finish ``error`` saying why.
    """

    def __init__(
        self,
        model: str,
        *,
        client: AsyncAnthropic | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
    ) -> None:
        import anthropic

        self._sdk = anthropic
        self._model = model
        self._owned = client is None
        if client is None:
            client = anthropic.AsyncAnthropic(base_url=base_url, api_key=api_key or "unused")
        self.client: AsyncAnthropic = client.with_options(timeout=timeout, max_retries=0)

    @property
    def name(self) -> str:
        return self._model

    def __repr__(self) -> str:
        return f"<AnthropicMessages model={self._model!r} base_url={str(self.client.base_url)!r}>"

    async def aclose(self) -> None:
        """Close the client if this adapter made it."""
        if self._owned:
            await self.client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body sent for ``request``."""
        body = anthropic_request(
            request.messages,
            system=request.system,
            tools=request.tools,
            model=request.model or self._model,
            params=request.params,
        )
        body["stream"] = True
        return body

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        """Stream the reply to ``request``: deltas, then one :class:`~agent.Finish`.

        :raises ModelError: the request failed, the stream broke or carried an error event, or
            it ended without a stop reason.
        """
        body = self.body(request)
        required = {key: body.pop(key) for key in ("model", "max_tokens", "messages", "stream")}
        state = _State()
        with provider_errors(self._sdk, "anthropic"):
            stream = await self.client.messages.create(**required, extra_body=body)
            async with stream:
                async for event in stream:
                    out = state.feed(event)
                    if out is not None:
                        yield out
        yield state.finish()


class _State:
    """The stop reason and usage so far (usage: input from ``message_start``, output from the
    last ``message_delta``, which reports it cumulatively)."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self.input_tokens = 0
        self.cache_read = 0
        self.output_tokens = 0

    def feed(self, event: Any) -> Chunk | None:
        kind = event.type
        if kind == "content_block_delta":
            return _delta(event.index, event.delta)
        if kind == "content_block_start":
            block = event.content_block
            if block.type == "tool_use":
                return ToolCallDelta(index=event.index, id=block.id, name=block.name)
            if block.type == "redacted_thinking":
                return ReasoningDelta(text="", redacted=block.data)
        elif kind == "message_start":
            usage = event.message.usage
            self.input_tokens = usage.input_tokens
            self.cache_read = usage.cache_read_input_tokens or 0
        elif kind == "message_delta":
            self.reason = event.delta.stop_reason or self.reason
            self.output_tokens = event.usage.output_tokens
            if event.usage.input_tokens is not None:
                self.input_tokens = event.usage.input_tokens
        return None

    def finish(self) -> Finish:
        if self.reason is None:
            raise ModelError("anthropic: the stream ended without a stop reason")
        usage = Usage(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cache_read_tokens=self.cache_read,
        )
        kind = _STOP.get(self.reason)
        if kind is None:
            why = _WHY.get(self.reason, f"stop reason {self.reason!r}")
            return Finish(kind="error", usage=usage, error=why)
        return Finish(kind=kind, usage=usage)


def _delta(index: int, delta: Any) -> Chunk | None:
    kind = delta.type
    if kind == "text_delta":
        return TextDelta(text=delta.text)
    if kind == "thinking_delta":
        return ReasoningDelta(text=delta.thinking)
    if kind == "signature_delta":
        return ReasoningDelta(text="", signature=delta.signature)
    if kind == "input_json_delta":
        return ToolCallDelta(index=index, arguments=delta.partial_json)
    return None  # citations: not kept
