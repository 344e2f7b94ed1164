"""One step's model attempts: send the request, settle the reply, retry what failed.

Before each attempt the session is flushed (the request is never sent for input that is not
durable). An attempt that fails (the stream raised, broke, finished ``error`` or without a
finish) or comes back *empty* (a normal finish with no text and no tool calls) is recorded as a
log-only ``assistant/attempt`` carrying why, and tried again as the agent's
:class:`~agent.RetryPolicy` says; when the policy gives up the step ends ``error``. A reply with
something in it is committed as ``assistant/message``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from eventlog import (
    APPEND,
    AssistantAttempt,
    AssistantMessage,
    Message,
    ReasoningPart,
    Session,
    TextPart,
    ToolCallPart,
    new_id,
)

from ._assembly import Assembler
from ._interrupt import Interrupter, stream_into
from ._model import Chunk, Model, ModelError, ModelRequest
from ._retry import RetryPolicy

__all__ = ("Settled", "StepAttempts", "empty_reply_error")

logger = logging.getLogger("agent")


@dataclass(frozen=True, slots=True)
class Settled:
    """How a step's model reply settled: ``"reply"`` (an ``assistant/message`` at ``seq``, whose
    ``tool_calls`` are to run), or ``"max-tokens"``, ``"aborted"`` or ``"error"``."""

    kind: Literal["reply", "max-tokens", "aborted", "error"]
    seq: int | None = None
    tool_calls: tuple[ToolCallPart, ...] = ()


@dataclass(frozen=True, slots=True)
class _Failure:
    """A failed attempt: why (recorded), whether it may be retried, and the server's wait."""

    error: str
    retryable: bool = True
    retry_after: float | None = None


def empty_reply_error(finish: str, message: Message | None) -> str:
    """What an empty attempt records: how it finished, and the reasoning it held, if any."""
    reasoning = (
        sum(len(p.text) for p in message.content if isinstance(p, ReasoningPart))
        if message is not None
        else 0
    )
    held = f" (only {reasoning} characters of reasoning)" if reasoning else ""
    return f"empty reply: the model finished {finish!r} with no text and no tool calls{held}"


@dataclass(frozen=True, slots=True)
class StepAttempts:
    """The attempts of step ``step`` of turn ``turn``; ``show`` sees every live chunk."""

    session: Session
    model: Model
    interrupter: Interrupter
    show: Callable[[Chunk], None]
    policy: RetryPolicy
    turn: int
    step: int

    async def settle(self, request: ModelRequest) -> Settled:
        """Attempt ``request`` until a reply settles, the policy gives up, or a cancel."""
        retries = 0
        while True:
            if self.interrupter.cancelled:
                return Settled("aborted")  # cancelled before the request was sent
            await self.session.flush()  # checkpoint: the request is never sent for undurable input
            if self.interrupter.cancelled:
                return Settled("aborted")  # cancelled during the checkpoint
            outcome = await self._attempt(request)
            if isinstance(outcome, Settled):
                return outcome
            self.session.append(
                "assistant/attempt",
                AssistantAttempt(turn=self.turn, step=self.step, error=outcome.error),
            )
            retries += 1
            delay = self.policy.delay(retries, outcome.retry_after) if outcome.retryable else None
            if delay is None:
                logger.warning(
                    "agent: session %r turn %d step %d: attempt %d failed (%s); %s",
                    self.session.id, self.turn, self.step, retries, outcome.error,
                    self._why_not(outcome, retries),
                    extra={"attempt": retries, "retry_delay": None},
                )  # fmt: skip
                return Settled("error")
            logger.info(
                "agent: session %r turn %d step %d: attempt %d failed (%s); retrying in %.3f s",
                self.session.id, self.turn, self.step, retries, outcome.error, delay,
                extra={"attempt": retries, "retry_delay": delay},
            )  # fmt: skip
            await self.interrupter.pause(delay)

    def _why_not(self, failure: _Failure, retries: int) -> str:
        """Why the policy gave up on ``failure``, for the log."""
        if not failure.retryable:
            return "not retryable, the turn ends error"
        if retries > self.policy.max_retries:
            return f"{self.policy.max_retries} retries spent, the turn ends error"
        return (
            f"the server asked to wait {failure.retry_after:g} s, more than the policy's "
            f"max_retry_after of {self.policy.max_retry_after:g} s: the turn ends error"
        )

    async def _attempt(self, request: ModelRequest) -> Settled | _Failure:
        """One attempt: its reply committed, or why it failed (for the caller to record)."""
        assembler = Assembler(new_id())
        error, cancelled, raised = await stream_into(
            self.model, request, assembler, self.interrupter, self.show
        )
        if error is not None:
            if isinstance(raised, ModelError):
                return _Failure(error, raised.retryable, raised.retry_after)
            return _Failure(error)
        reply = assembler.settle(cancelled=cancelled)
        finish = assembler.finish
        kind = "canceled" if cancelled else finish.kind if finish else "stop"
        if kind in ("stop", "tool-calls") and not _says_something(reply.message):
            return _Failure(empty_reply_error(kind, reply.message))
        if reply.message is None:  # cancelled, or cut by max-tokens, before anything visible
            self.session.append(
                "assistant/attempt", AssistantAttempt(turn=self.turn, step=self.step)
            )
            return Settled("aborted" if cancelled else "max-tokens")
        event = self.session.append(
            "assistant/message",
            AssistantMessage(
                turn=self.turn,
                step=self.step,
                message=reply.message,
                finish=kind,
                usage=assembler.usage,
                interrupted=reply.interrupted,
            ),
            surface=APPEND,
        )
        if cancelled:
            return Settled("aborted")
        if kind == "max-tokens":
            return Settled("max-tokens")
        return Settled("reply", event.seq, reply.tool_calls)


def _says_something(message: Message | None) -> bool:
    """True when a reply has text or a tool call (reasoning alone answers nothing)."""
    if message is None:
        return False
    return any(
        isinstance(part, ToolCallPart) or (isinstance(part, TextPart) and part.text.strip())
        for part in message.content
    )
