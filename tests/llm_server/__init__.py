"""A loopback provider server for tests: scripted replies in each provider's wire format.

``LLMServer`` serves :class:`Reply` s in order on 127.0.0.1 and records every request's JSON
body; :mod:`tests.llm_server.wire` builds OpenAI and Anthropic streams. Point a real SDK client
at ``server.url`` (``/v1`` for OpenAI)::

    with LLMServer(Reply(events=openai_events(text="hi"))) as server:
        client = AsyncOpenAI(base_url=server.url + "/v1", api_key="test")
        ...
        assert server.bodies[0]["messages"] == [...]
"""

from ._server import LLMServer, Received, Reply, StreamCut
from .wire import (
    anthropic_events,
    anthropic_sse,
    openai_chunk,
    openai_events,
    openai_sse,
    pieces,
)

__all__ = (
    "LLMServer",
    "Received",
    "Reply",
    "StreamCut",
    "anthropic_events",
    "anthropic_sse",
    "openai_chunk",
    "openai_events",
    "openai_sse",
    "pieces",
)
