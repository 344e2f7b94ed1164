"""Projections: pure folds over a session's events, caught up lazily when read.

See docs/architecture.md.

The package exports its read API: the four projections (``surface``, ``messages``, ``inbox``,
``timeline``), the converters of messages to provider formats, the request builders, and the
types they return. The machinery for writing a projection of your own lives in
``projections.base``; the builders of ``agent/inbox/spliced`` payloads (enqueue, claim, cancel)
in ``projections.inbox_splices``; the inbox fold in ``projections.inbox``.
"""

from ._snapshot_states import register as _register_snapshot_states
from .formats import Attachments, Degrade, to_anthropic, to_openai, to_openai_responses
from .inbox import Inbox, inbox
from .messages import MessagesView, messages, messages_at
from .requests import (
    ANTHROPIC_DEFAULT_MAX_TOKENS,
    anthropic_request,
    anthropic_tools,
    openai_request,
    openai_tools,
)
from .surface import Surface, surface
from .timeline import (
    CallKey,
    CallStatus,
    Finding,
    OpenStep,
    OpenTurn,
    Timeline,
    ToolCallState,
    timeline,
    timeline_at,
)

_register_snapshot_states()

__all__ = (
    "Attachments",
    "ANTHROPIC_DEFAULT_MAX_TOKENS",
    "anthropic_request",
    "anthropic_tools",
    "openai_request",
    "openai_tools",
    "CallKey",
    "CallStatus",
    "Degrade",
    "Finding",
    "Inbox",
    "MessagesView",
    "OpenStep",
    "OpenTurn",
    "Surface",
    "Timeline",
    "ToolCallState",
    "inbox",
    "messages",
    "messages_at",
    "surface",
    "timeline",
    "timeline_at",
    "to_anthropic",
    "to_openai",
    "to_openai_responses",
)
