"""``AnthropicMessages``: the Messages API streamed through the official ``anthropic`` SDK.

The request body is :func:`projections.anthropic_request`'s, plus ``stream``. The raw stream
events map to chunks: ``text_delta`` → text, ``thinking_delta`` and ``signature_delta`` →
reasoning with its signature (so a thinking block can be sent back unchanged),
``redacted_thinking`` → a reasoning delta carrying the opaque data, ``tool_use`` and its
``input_json_delta`` pieces → tool-call deltas keyed by the content block's index.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from eventlog import Usage, needs_extra
from projections import Degrade, anthropic_request

from .._loop._model import (
    Chunk,
    Finish,
    FinishKind,
    ModelError,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
)
from ._base import ProviderModel

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


class AnthropicMessages(ProviderModel):
    """A :class:`~agent.Model` over the Anthropic Messages API (needs the ``anthropic`` extra).

    :param model: the model name sent when the request names none (``ModelRequest.model`` wins).
    :param client: a ready ``AsyncAnthropic``; the caller keeps owning it. Without one, a client
        is made from ``base_url`` and ``api_key`` and closed by :meth:`aclose`.
    :param timeout: seconds an attempt may wait for the server (to connect, and between bytes
        of the stream) before it fails, retryably.
    :param degrade: what to do with a part the provider cannot take (an image in a Chat
        Completions tool result, a media type it does not read): ``"refuse"`` (raise
        :class:`~eventlog.ValidationError` before sending), ``"text"`` (send a short text saying
        what was there) or ``"drop"`` (leave it out); see :func:`projections.to_openai`.
    :raises AgentConfigError: an argument of the wrong type or value (``client`` must be the
        SDK's async client; ``base_url`` and ``api_key`` only without one).
    :raises MissingExtraError: the ``anthropic`` package is not installed (the ``anthropic`` extra).

    Errors and retries as :class:`~agent.models.OpenAIChat`; an ``error`` event inside the
    stream (``overloaded_error``) is retryable. Stop reasons ``end_turn`` and ``stop_sequence``
    finish ``stop``, ``tool_use`` ``tool-calls``, ``max_tokens`` ``max-tokens``; ``refusal``
    and ``pause_turn`` finish ``error`` saying why.
    """

    provider = "anthropic"
    build = staticmethod(anthropic_request)
    streaming = MappingProxyType({"stream": True})
    required = ("model", "max_tokens", "messages", "stream")
    client_classes = ("AsyncAnthropic", "AsyncAnthropicBedrock", "AsyncAnthropicVertex")
    client: AsyncAnthropic

    def __init__(
        self,
        model: str,
        *,
        client: AsyncAnthropic | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        degrade: Degrade = "refuse",
    ) -> None:
        with needs_extra("anthropic", "agent.models.AnthropicMessages", "anthropic"):
            import anthropic

        super().__init__(
            anthropic, model, client, timeout, degrade, base_url=base_url, api_key=api_key
        )

    def _make_client(self, *, base_url: str | None, api_key: str | None) -> AsyncAnthropic:
        return self._sdk.AsyncAnthropic(base_url=base_url, api_key=api_key or "unused")  # type: ignore[no-any-return]

    def _state(self) -> _State:
        return _State()

    async def _create(self, required: dict[str, Any], extra: dict[str, Any]) -> Any:
        return await self.client.messages.create(**required, extra_body=extra)


class _State:
    """The stop reason and usage so far (usage: input and cache reads and writes from
    ``message_start``, output from the last ``message_delta``, which reports it cumulatively,
    and may restate the others)."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self.input_tokens = 0
        self.cache_read = 0
        self.cache_write = 0
        self.output_tokens = 0

    def feed(self, event: Any) -> tuple[Chunk, ...]:
        kind = event.type
        if kind == "content_block_delta":
            chunk = _delta(event.index, event.delta)
            return () if chunk is None else (chunk,)
        if kind == "content_block_start":
            block = event.content_block
            if block.type == "tool_use":
                return (ToolCallDelta(index=event.index, id=block.id, name=block.name),)
            if block.type == "redacted_thinking":
                return (ReasoningDelta(text="", redacted=block.data),)
        elif kind == "message_start":
            usage = event.message.usage
            self.input_tokens = usage.input_tokens
            self.cache_read = usage.cache_read_input_tokens or 0
            self.cache_write = usage.cache_creation_input_tokens or 0
        elif kind == "message_delta":
            self.reason = event.delta.stop_reason or self.reason
            self.output_tokens = event.usage.output_tokens
            # The delta's usage is cumulative; the cache counts come again only sometimes.
            if event.usage.input_tokens is not None:
                self.input_tokens = event.usage.input_tokens
            if event.usage.cache_read_input_tokens is not None:
                self.cache_read = event.usage.cache_read_input_tokens
            if event.usage.cache_creation_input_tokens is not None:
                self.cache_write = event.usage.cache_creation_input_tokens
        return ()

    def finish(self) -> Finish:
        if self.reason is None:
            raise ModelError("anthropic: the stream ended without a stop reason")
        usage = Usage(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cache_read_tokens=self.cache_read,
            cache_write_tokens=self.cache_write,
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
