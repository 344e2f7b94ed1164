"""Projections: pure folds over a session's events, caught up lazily when read.

See docs/architecture.md.

The package exports its read API: the projections (``surface``, ``messages``, ``inbox``,
``timeline``, ``request_header``), the converters of messages to provider formats, the request
builders, and the types they return. The machinery for writing a projection of your own lives
in ``projections.base``; the inbox fold and the builders of its ``agent/inbox/spliced``
payloads (enqueue, claim, cancel) together in ``projections.inbox``. ``SNAPSHOT_STATES`` are the
codecs of the states a store's snapshots carry by default (``open_store``'s
``snapshot_states``).
"""

from ._formats import Attachments, Degrade, to_anthropic, to_openai, to_openai_responses
from ._messages import MessagesView, messages, messages_at
from ._requests import (
    ANTHROPIC_DEFAULT_MAX_TOKENS,
    anthropic_request,
    anthropic_tools,
    openai_request,
    openai_tools,
)
from ._snapshot_states import SNAPSHOT_STATES
from ._surface import Surface, surface
from ._timeline import (
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
from .header import request_header
from .inbox import Inbox, inbox

__all__ = (
    "Attachments",
    "ANTHROPIC_DEFAULT_MAX_TOKENS",
    "SNAPSHOT_STATES",
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
    "request_header",
    "surface",
    "timeline",
    "timeline_at",
    "to_anthropic",
    "to_openai",
    "to_openai_responses",
)
