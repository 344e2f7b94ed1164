"""Whole request bodies for provider APIs: system prompt, messages, tools and parameters.

- :func:`openai_request`: an OpenAI Chat Completions ``create`` body, accepted by OpenAI's
  documented schema and by OpenAI-compatible servers (llama.cpp, vLLM, Ollama, DeepSeek).
- :func:`anthropic_request`: an Anthropic Messages ``create`` body.

The provider adapters of ``agent.models`` send exactly these bodies, and ``eventlog replay
--format openai|anthropic`` prints them, so what an auditor reads is what was sent. Both are
pure: the same history, header and parameters always give the same body. ``params`` are the
provider's own keys (``temperature``, ``max_tokens``, ``tool_choice``, ...), copied as given;
streaming options are the adapters' business, not part of the body built here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from eventlog import Message, ToolSpec, ValidationError

from ._formats import to_anthropic, to_openai
from ._media import Attachments, Degrade

__all__ = (
    "ANTHROPIC_DEFAULT_MAX_TOKENS",
    "anthropic_request",
    "anthropic_tools",
    "openai_request",
    "openai_tools",
)

#: The ``max_tokens`` an Anthropic body gets when ``params`` has none (the API requires one).
ANTHROPIC_DEFAULT_MAX_TOKENS = 4096

#: Keys the builders own: a parameter may not replace them.
_OWNED = frozenset({"model", "messages", "tools", "system", "stream", "stream_options"})


def openai_tools(tools: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    """Chat Completions ``tools``: ``{"type": "function", "function": {name, description,
    parameters}}`` per spec (an empty schema becomes ``{"type": "object", "properties": {}}``,
    which every server takes)."""
    return [
        {
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": _schema(spec),
            },
        }
        for spec in tools
    ]


def anthropic_tools(tools: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    """Messages API ``tools``: ``{name, description, input_schema}`` per spec."""
    return [
        {"name": spec.name, "description": spec.description, "input_schema": _schema(spec)}
        for spec in tools
    ]


def openai_request(
    messages: Iterable[Message],
    *,
    system: str = "",
    tools: Iterable[ToolSpec] = (),
    model: str = "",
    params: Mapping[str, Any] | None = None,
    attachments: Attachments | None = None,
    degrade: Degrade = "refuse",
) -> dict[str, Any]:
    """The Chat Completions body: ``model``, ``messages`` (a ``system`` message first when
    ``system`` is not empty, then :func:`~projections.to_openai`), ``tools`` (only when there
    are some: OpenAI refuses an empty list), then ``params``. ``attachments`` (digest → bytes)
    and ``degrade`` go to the message converter: the bytes of the attachments the messages
    reference, and what to do with a part the provider cannot take.

    :raises ValidationError: a message carries a part its role cannot carry, or ``params``
        names a key the builder owns (``model``, ``messages``, ``tools``, ``system``,
        ``stream``, ``stream_options``); a part the provider cannot take (with
        ``degrade="refuse"``) or an attachment missing from ``attachments``.
    """
    head = [{"role": "system", "content": system}] if system else []
    body: dict[str, Any] = {
        "model": model,
        "messages": head + to_openai(messages, attachments=attachments, degrade=degrade),
    }
    specs = openai_tools(tools)
    if specs:
        body["tools"] = specs
    return _with_params(body, params, "openai_request")


def anthropic_request(
    messages: Iterable[Message],
    *,
    system: str = "",
    tools: Iterable[ToolSpec] = (),
    model: str = "",
    params: Mapping[str, Any] | None = None,
    attachments: Attachments | None = None,
    degrade: Degrade = "refuse",
) -> dict[str, Any]:
    """The Messages API body: ``model``, ``max_tokens`` (from ``params``, else
    :data:`ANTHROPIC_DEFAULT_MAX_TOKENS`), ``system`` (only when not empty), ``messages``
    (:func:`~projections.to_anthropic`), ``tools`` (only when there are some), then ``params``.

    :raises ValidationError: as :func:`openai_request`.
    """
    body: dict[str, Any] = {"model": model, "max_tokens": ANTHROPIC_DEFAULT_MAX_TOKENS}
    if system:
        body["system"] = system
    body["messages"] = to_anthropic(messages, attachments=attachments, degrade=degrade)
    specs = anthropic_tools(tools)
    if specs:
        body["tools"] = specs
    return _with_params(body, params, "anthropic_request")


def _with_params(
    body: dict[str, Any], params: Mapping[str, Any] | None, builder: str
) -> dict[str, Any]:
    clash = sorted(_OWNED.intersection(params or {}))
    if clash:
        raise ValidationError(
            f"{builder}: parameter {clash[0]!r} is part of the request the builder makes; "
            "pass it as an argument, not in params"
        )
    body.update(params or {})
    return body


def _schema(spec: ToolSpec) -> dict[str, Any]:
    return spec.parameters or {"type": "object", "properties": {}}
