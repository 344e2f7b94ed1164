"""The core event vocabulary: payload classes for every core event type.

Type names and field names are part of the on-disk format: never rename them. New fields get
defaults; a field's type never changes (msgspec's schema-evolution rules).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from ._message import Message

__all__ = (
    "CORE_TYPES",
    "SURFACE_TYPES",
    "AssistantAttempt",
    "AssistantMessage",
    "CompactionEnd",
    "CompactionStart",
    "CompactionSummary",
    "FinishReason",
    "HookDecision",
    "HookName",
    "HookVerdict",
    "InboxItem",
    "InboxSpliced",
    "InboxTarget",
    "RequestHeader",
    "SessionForked",
    "StepEnd",
    "StepStart",
    "ApprovalDecision",
    "ToolApproval",
    "ToolApprovalRequest",
    "ToolCall",
    "ToolError",
    "ToolOutcome",
    "ToolResult",
    "ToolSpec",
    "TurnEnd",
    "TurnEndReason",
    "TurnStart",
    "Usage",
    "UserMessage",
)

TurnEndReason = Literal["completed", "aborted", "blocked", "error", "max-tokens", "interrupted"]
FinishReason = Literal["stop", "tool-calls", "max-tokens", "error", "canceled"]
InboxTarget = Literal["next-turn", "next-step"]
ApprovalDecision = Literal["approve", "deny"]


class _Payload(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=False, gc=False):
    """Base of every payload: frozen, keyword-only, unknown fields tolerated on read.

    ``gc=False``: payloads are frozen trees decoded from JSON, so they cannot form reference
    cycles; not tracking them keeps the garbage collector off the load and commit paths.
    """


class TurnStart(_Payload, frozen=True, kw_only=True):
    """A turn begins. Turns count from 1."""

    turn: int


class TurnEnd(_Payload, frozen=True, kw_only=True):
    """A turn ends; ``interrupted`` is written only by recovery."""

    turn: int
    reason: TurnEndReason


class StepStart(_Payload, frozen=True, kw_only=True):
    """A step (one model request and its tools) begins. Steps count from 1 in each turn."""

    turn: int
    step: int


class StepEnd(_Payload, frozen=True, kw_only=True):
    """A step ends."""

    turn: int
    step: int


class UserMessage(_Payload, frozen=True, kw_only=True):
    """A user (or checkpoint) message on the surface."""

    message: Message


class Usage(_Payload, frozen=True, kw_only=True):
    """Token accounting reported by the model provider. ``cache_write_tokens`` are the input
    tokens written to the provider's prompt cache by this request (Anthropic's
    ``cache_creation_input_tokens``), where the provider reports them."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    reasoning_tokens: int = 0
    cache_write_tokens: int = 0


class AssistantMessage(_Payload, frozen=True, kw_only=True):
    """A settled model reply. ``interrupted`` marks a reply cut short (cancel, max tokens)."""

    turn: int
    step: int
    message: Message
    finish: FinishReason = "stop"
    usage: Usage | None = None
    interrupted: bool = False


class AssistantAttempt(_Payload, frozen=True, kw_only=True):
    """A settled model attempt that produced nothing model-visible (e.g. failed before output)."""

    turn: int
    step: int
    error: str | None = None


class ToolCall(_Payload, frozen=True, kw_only=True):
    """A tool body is about to run. Logged (and flushed) before the body starts."""

    turn: int
    step: int
    call_id: str
    name: str
    arguments: str


class ToolApprovalRequest(_Payload, frozen=True, kw_only=True):
    """A proposed call waits for a person's decision before it may run. Logged (and flushed)
    before the step's other calls start; ``reason`` is what the tool's approval policy said."""

    turn: int
    step: int
    call_id: str
    name: str
    arguments: str
    reason: str = ""


class ToolApproval(_Payload, frozen=True, kw_only=True):
    """The decision on one requested call (``turn``, ``step`` and ``call_id`` name it):
    ``approve`` lets it run, ``deny`` answers it ``TOOL_DENIED`` without running it. ``by``
    names who decided. At most one per call."""

    turn: int
    step: int
    call_id: str
    decision: ApprovalDecision
    by: str
    reason: str | None = None


class ToolError(_Payload, frozen=True, kw_only=True):
    """A machine-readable error classification of a tool result."""

    name: str
    code: str


class ToolOutcome(_Payload, frozen=True, kw_only=True):
    """A tool body finished; its result is durable before its turn in the model's order comes."""

    turn: int
    step: int
    call_id: str
    result: Message
    error: ToolError | None = None
    #: What the tool adds to the next step's request (see :class:`ToolResult`).
    context: Message | None = None


class ToolResult(_Payload, frozen=True, kw_only=True):
    """The answer to one tool call, on the surface, in the model's order.

    ``context`` (a ``user`` message) is what the tool adds to the next step's request: the
    messages projection places it after the step's last result, contexts in the model's order
    of the calls.
    """

    turn: int
    step: int
    message: Message
    error: ToolError | None = None
    context: Message | None = None


class ToolSpec(_Payload, frozen=True, kw_only=True):
    """A tool as offered to the model: name, description and JSON-schema parameters."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = msgspec.field(default_factory=dict)


class RequestHeader(_Payload, frozen=True, kw_only=True):
    """What changed in the model request since the last header; ``None`` means unchanged."""

    system: str | None = None
    tools: tuple[ToolSpec, ...] | None = None
    model: str | None = None
    params: dict[str, Any] | None = None


class InboxItem(_Payload, frozen=True, kw_only=True):
    """One queued input. ``wake`` false means it waits for the next step without starting one."""

    id: str
    message: Message
    request_id: str | None = None
    wake: bool = True


class InboxSpliced(_Payload, frozen=True, kw_only=True):
    """Splice of one inbox list: remove ``removed`` items at ``start``, insert ``inserted``.

    ``outcome`` says why items were removed: ``claimed`` (taken by a step), ``canceled``
    (withdrawn by the user) or ``refused`` (the agent's ``before_step`` hook blocked the step
    that would have taken them).
    """

    target: InboxTarget
    start: int
    removed: int = 0
    inserted: tuple[InboxItem, ...] = ()
    outcome: Literal["claimed", "canceled", "refused"] | None = None


HookName = Literal["before_step", "should_continue"]
HookVerdict = Literal["none", "plan", "block", "continue", "stop", "error"]


class HookDecision(_Payload, frozen=True, kw_only=True):
    """What an agent hook decided for step ``step`` of turn ``turn``, recorded before it is
    acted on (so a crash never makes the hook decide twice).

    ``outcome``: ``none`` (``before_step`` returned nothing), ``plan`` (it changed the step's
    request: ``changed`` names the fields), ``block`` (the turn ends ``blocked``; ``reason``
    says why), ``continue`` / ``stop`` (what ``should_continue`` answered), ``error`` (the hook
    raised or returned something it may not; ``error`` says what, and the turn ends ``error``).
    """

    turn: int
    step: int
    hook: HookName
    outcome: HookVerdict
    changed: tuple[str, ...] = ()
    reason: str | None = None
    error: str | None = None


class CompactionStart(_Payload, frozen=True, kw_only=True):
    """A compaction of the surface span ``[start, end]`` (seqs of current nodes) begins."""

    start: int
    end: int
    trigger: Literal["auto", "manual"] = "auto"


class CompactionSummary(_Payload, frozen=True, kw_only=True):
    """The summary produced for a compaction."""

    text: str
    usage: Usage | None = None


class CompactionEnd(_Payload, frozen=True, kw_only=True):
    """A compaction ends; ``checkpoint`` is the seq of the replacing message when completed."""

    outcome: Literal["completed", "aborted"] = "completed"
    checkpoint: int | None = None


class SessionForked(_Payload, frozen=True, kw_only=True):
    """This session was forked from ``parent`` after its event ``boundary``."""

    parent: str
    boundary: int


#: Type name → payload class for every core type.
CORE_TYPES: dict[str, type[msgspec.Struct]] = {
    "turn/start": TurnStart,
    "turn/end": TurnEnd,
    "step/start": StepStart,
    "step/end": StepEnd,
    "user/message": UserMessage,
    "assistant/message": AssistantMessage,
    "assistant/attempt": AssistantAttempt,
    "tool/call": ToolCall,
    "tool/approval-request": ToolApprovalRequest,
    "tool/approval": ToolApproval,
    "tool/outcome": ToolOutcome,
    "tool/result": ToolResult,
    "request/header": RequestHeader,
    "agent/inbox/spliced": InboxSpliced,
    "agent/hook": HookDecision,
    "compaction/start": CompactionStart,
    "compaction/summary": CompactionSummary,
    "compaction/end": CompactionEnd,
    "session/forked": SessionForked,
}

#: The types whose ``message`` the model sees; only they carry a surface operation.
SURFACE_TYPES: frozenset[str] = frozenset({"user/message", "assistant/message", "tool/result"})
