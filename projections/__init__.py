"""Projections: pure folds over a session's events, caught up lazily when read (DESIGN §6)."""

from .base import Projection, catch_up, events_through, fold
from .formats import Attachments, Degrade, to_anthropic, to_openai, to_openai_responses, tool_input
from .inbox import INBOX, Inbox, InboxProjection, InboxState, inbox, normalize_splice
from .inbox_splices import Claim, cancel, cancel_all, claim, enqueue, splice
from .messages import MessagesView, derive, messages
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
)

__all__ = (
    "Attachments",
    "ANTHROPIC_DEFAULT_MAX_TOKENS",
    "anthropic_request",
    "anthropic_tools",
    "openai_request",
    "openai_tools",
    "CallKey",
    "CallStatus",
    "Claim",
    "Degrade",
    "Finding",
    "INBOX",
    "Inbox",
    "InboxProjection",
    "InboxState",
    "MessagesView",
    "OpenStep",
    "OpenTurn",
    "Projection",
    "Surface",
    "Timeline",
    "ToolCallState",
    "cancel",
    "cancel_all",
    "catch_up",
    "claim",
    "derive",
    "enqueue",
    "events_through",
    "fold",
    "inbox",
    "messages",
    "normalize_splice",
    "splice",
    "surface",
    "timeline",
    "to_anthropic",
    "to_openai",
    "to_openai_responses",
    "tool_input",
)
