"""Provider adapters: :class:`~agent.Model` s over the official SDKs (optional extras).

- :class:`OpenAIChat` — Chat Completions, for OpenAI and OpenAI-compatible servers
  (``pip install 'agent-eventlog[openai]'``).
- :class:`AnthropicMessages` — the Anthropic Messages API
  (``pip install 'agent-eventlog[anthropic]'``).

Importing this package imports no SDK: each adapter imports its SDK when it is built.
"""

from ._anthropic import AnthropicMessages
from ._openai import OpenAIChat

__all__ = ("AnthropicMessages", "OpenAIChat")
