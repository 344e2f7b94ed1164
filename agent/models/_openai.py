"""``OpenAIChat``: streaming Chat Completions through the official ``openai`` SDK.

For OpenAI and every OpenAI-compatible server (DeepSeek, vLLM, llama.cpp, Ollama, OpenRouter).
The request body is :func:`projections.openai_request`'s, plus ``stream`` and
``stream_options.include_usage``. What servers are known to do differently is absorbed here:

- a tool call's ``id`` and ``name`` may come once or on every delta (llama.cpp repeats them);
  they are passed on once per call ``index``, as the :class:`~agent.ToolCallDelta` contract says;
- reasoning comes as ``reasoning_content`` (DeepSeek) or ``reasoning`` (vLLM, OpenRouter);
- usage comes on a last chunk without choices; cached prompt tokens as
  ``prompt_tokens_details.cached_tokens`` (OpenAI) or ``prompt_cache_hit_tokens`` (DeepSeek);
  tokens written to the cache as ``prompt_tokens_details.cache_write_tokens`` (OpenRouter).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from eventlog import Usage, needs_extra
from projections import Degrade, openai_request

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
    from openai import AsyncOpenAI
    from openai.types.chat import ChatCompletionChunk
    from openai.types.completion_usage import CompletionUsage

__all__ = ("OpenAIChat",)

_FINISH: dict[str, FinishKind] = {
    "stop": "stop",
    "tool_calls": "tool-calls",
    "length": "max-tokens",
}


class OpenAIChat(ProviderModel):
    """A :class:`~agent.Model` over Chat Completions (needs the ``openai`` extra).

    :param model: the model name sent when the request names none (``ModelRequest.model`` wins).
    :param client: a ready ``AsyncOpenAI``; the caller keeps owning it. Without one, a client is
        made from ``base_url`` and ``api_key`` and closed by :meth:`aclose` (or ``async with``).
    :param timeout: seconds an attempt may wait for the server (to connect, and between bytes
        of the stream) before it fails, retryably.
    :param degrade: what to do with a part the provider cannot take (an image in a Chat
        Completions tool result, a media type it does not read): ``"refuse"`` (raise
        :class:`~eventlog.ValidationError` before sending), ``"text"`` (send a short text saying
        what was there) or ``"drop"`` (leave it out); see :func:`projections.to_openai`.
    :raises AgentConfigError: an argument of the wrong type or value (``client`` must be the
        SDK's async client; ``base_url`` and ``api_key`` only without one).
    :raises MissingExtraError: the ``openai`` package is not installed (the ``openai`` extra).

    Every attempt is one HTTP request: the SDK's own retries are off, so the agent retries and
    logs each failed attempt. Errors are :class:`~agent.ModelError`: transport errors, timeouts,
    429 and 5xx retryable (with the server's ``retry-after``), other 4xx not, with the server's
    message; a stream that ends without a finish reason fails the attempt. Closing the stream
    early (a cancel) closes the HTTP response.
    """

    provider = "openai"
    build = staticmethod(openai_request)
    streaming = MappingProxyType({"stream": True, "stream_options": {"include_usage": True}})
    required = ("model", "messages", "stream")
    client_classes = ("AsyncOpenAI",)  # AsyncAzureOpenAI is one
    client: AsyncOpenAI

    def __init__(
        self,
        model: str,
        *,
        client: AsyncOpenAI | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        degrade: Degrade = "refuse",
    ) -> None:
        with needs_extra("openai", "agent.models.OpenAIChat", "openai"):
            import openai

        super().__init__(
            openai, model, client, timeout, degrade, base_url=base_url, api_key=api_key
        )

    def _make_client(self, *, base_url: str | None, api_key: str | None) -> AsyncOpenAI:
        return self._sdk.AsyncOpenAI(base_url=base_url, api_key=api_key or "unused")  # type: ignore[no-any-return]

    def _state(self) -> _State:
        return _State()

    async def _create(self, required: dict[str, Any], extra: dict[str, Any]) -> Any:
        return await self.client.chat.completions.create(**required, extra_body=extra)


class _State:
    """What one stream has shown so far: the finish reason, usage, ids and names sent."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self.usage: Usage | None = None
        self.announced: dict[int, tuple[str | None, str | None]] = {}

    def feed(self, chunk: ChatCompletionChunk) -> list[Chunk]:
        if chunk.usage is not None:
            self.usage = _usage(chunk.usage)
        out: list[Chunk] = []
        for choice in chunk.choices[:1]:  # n=1: one choice
            delta = choice.delta
            reasoning = _reasoning(delta)
            if reasoning:
                out.append(ReasoningDelta(text=reasoning))
            if delta.content:
                out.append(TextDelta(text=delta.content))
            out.extend(self._call(call) for call in delta.tool_calls or ())
            if choice.finish_reason is not None:
                self.reason = choice.finish_reason
        return out

    def _call(self, call: Any) -> ToolCallDelta:
        seen_id, seen_name = self.announced.get(call.index, (None, None))
        function = call.function
        name = function.name if function is not None else None
        arguments = (function.arguments if function is not None else None) or ""
        new_id = call.id if call.id and call.id != seen_id else None
        new_name = name if name and name != seen_name else None
        self.announced[call.index] = (seen_id or call.id, seen_name or name)
        return ToolCallDelta(index=call.index, id=new_id, name=new_name, arguments=arguments)

    def finish(self) -> Finish:
        if self.reason is None:
            raise ModelError("openai: the stream ended without a finish reason")
        kind = _FINISH.get(self.reason)
        if kind is None:
            return Finish(kind="error", usage=self.usage, error=f"finish reason {self.reason!r}")
        return Finish(kind=kind, usage=self.usage)


def _reasoning(delta: Any) -> str:
    extra = delta.model_extra or {}
    value = extra.get("reasoning_content") or extra.get("reasoning")
    return value if isinstance(value, str) else ""


def _usage(usage: CompletionUsage) -> Usage:
    prompt = usage.prompt_tokens_details
    cached = prompt.cached_tokens if prompt else None
    if cached is None:
        cached = (usage.model_extra or {}).get("prompt_cache_hit_tokens")
    details = usage.completion_tokens_details
    return Usage(
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        cache_read_tokens=int(cached or 0),
        reasoning_tokens=int((details.reasoning_tokens if details else None) or 0),
        cache_write_tokens=_cache_writes(prompt),
    )


def _cache_writes(prompt: Any) -> int:
    """``prompt_tokens_details.cache_write_tokens``: what servers that proxy prompt-caching
    models report (OpenRouter); a field in newer SDKs, an extra in older ones."""
    if prompt is None:
        return 0
    value = getattr(prompt, "cache_write_tokens", None)
    if value is None:
        value = (prompt.model_extra or {}).get("cache_write_tokens")
    return value if isinstance(value, int) else 0
