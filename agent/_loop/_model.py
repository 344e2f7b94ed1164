"""The model protocol: a frozen request in, a stream of chunks out.

A model turns a :class:`ModelRequest` into an async stream of chunks: text, reasoning and
tool-call deltas, then exactly one :class:`Finish`. A stream that raises, or finishes with
``error``, is a failed attempt; the agent records it and may retry within the same step.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import msgspec

from eventlog import Message, ToolSpec, Usage

from ._checks import described, refuse

__all__ = (
    "Chunk",
    "Finish",
    "FinishKind",
    "Model",
    "ModelError",
    "ModelRequest",
    "ReasoningDelta",
    "TextDelta",
    "ToolCallDelta",
    "check_model",
)

FinishKind = Literal["stop", "tool-calls", "max-tokens", "error"]


class TextDelta(msgspec.Struct, frozen=True, kw_only=True, tag="text"):
    """A fragment of the reply's visible text."""

    text: str


class ReasoningDelta(msgspec.Struct, frozen=True, kw_only=True, tag="reasoning"):
    """A fragment of the model's reasoning; ``signature`` may come with the last fragment.

    ``redacted`` carries a whole redacted reasoning block's opaque data (Anthropic's
    ``redacted_thinking``), with empty ``text``.
    """

    text: str
    signature: str | None = None
    redacted: str | None = None


class ToolCallDelta(msgspec.Struct, frozen=True, kw_only=True, tag="tool-call"):
    """A fragment of the tool call at ``index``: id and name come once, arguments in pieces."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


class Finish(msgspec.Struct, frozen=True, kw_only=True, tag="finish"):
    """The end of a stream. ``error`` describes a failed finish (``kind="error"``)."""

    kind: FinishKind
    usage: Usage | None = None
    error: str | None = None


Chunk = TextDelta | ReasoningDelta | ToolCallDelta | Finish


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """What is sent to the model, frozen when sent.

    ``messages`` is the session's immutable message view: later appends do not show through.
    ``attachments`` holds the bytes of the stored attachments those messages reference, by
    digest (``"sha256:<hex>"``): the agent loads them from its store before sending, so a
    model can send an image the log holds only by reference.
    """

    messages: Sequence[Message]
    system: str = ""
    tools: tuple[ToolSpec, ...] = ()
    model: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)
    attachments: Mapping[str, bytes] = field(default_factory=dict)


class ModelError(Exception):
    """A model attempt failed (transport, overload, malformed stream, refused request).

    :ivar retryable: whether another attempt may succeed (transport errors, timeouts, 429 and
        5xx are; a 4xx refusal of the request is not, and the agent ends the turn ``error``
        without retrying it).
    :ivar retry_after: seconds the provider asked to wait before retrying, if it said; the
        agent waits that long before the next attempt, unless it is longer than its
        :class:`~agent.RetryPolicy` allows (then it gives up).
    :ivar status: the provider's HTTP status, when there was a response.
    :raises AgentConfigError: (building it) ``retryable`` is not a bool, ``retry_after`` not
        ``None`` or seconds ``>= 0``, or ``status`` not ``None`` or an int.
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = True,
        retry_after: float | None = None,
        status: int | None = None,
    ) -> None:
        if not isinstance(retryable, bool):
            raise refuse("ModelError", "retryable", "True or False", retryable)
        if retry_after is not None and not (
            isinstance(retry_after, int | float)
            and not isinstance(retry_after, bool)
            and retry_after >= 0  # NaN: refused; inf: allowed (a policy gives up on it)
        ):
            raise refuse("ModelError", "retry_after", "None or seconds >= 0", retry_after)
        if status is not None and type(status) is not int:
            raise refuse("ModelError", "status", "None or an HTTP status int", status)
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status


class Model(Protocol):
    """Anything that streams a reply to a request.

    ``stream`` must yield exactly one :class:`Finish`, last. Raising (any ``Exception``) or a
    ``Finish(kind="error")`` is a failed attempt. A cancelled stream is simply abandoned.
    Raising :class:`~eventlog.ValidationError` before sending anything says the request cannot
    be expressed for this model (a part its provider cannot take): the agent does not retry it,
    logs no attempt, closes the turn ``error`` and raises it to the caller.
    """

    @property
    def name(self) -> str: ...

    def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]: ...


def check_model(where: str, model: object) -> Model:
    """Something with a string ``name`` and a ``stream`` method (the :class:`~agent.Model`
    protocol)."""
    expected = "a Model (a string `name` and a `stream(request)` method, e.g. OpenAIChat)"
    if not callable(getattr(model, "stream", None)):
        raise refuse(where, "model", expected, model)
    name = getattr(model, "name", None)
    if not isinstance(name, str):
        raise refuse(where, "model", expected + f"; its name is {described(name)}", model)
    return model  # type: ignore[return-value]
