"""``DurableToolset``: a pydantic-ai toolset whose calls are logged around their bodies.

What the toolset calls on the history it logs into is listed by :class:`CallLog` here, so this
module imports nothing of the history's: ``EventlogHistory`` (which builds its durable
toolsets) satisfies the protocol, and the two halves do not import each other.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any, Protocol

from pydantic_ai.exceptions import ModelRetry, ToolFailed
from pydantic_ai.messages import ModelMessage
from pydantic_ai.tools import AgentDepsT, RunContext
from pydantic_ai.toolsets import WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from eventlog import ToolError
from recovery import TOOL_ERROR, TOOL_FAILED

__all__ = ("CallLog", "DurableToolset", "Verdict")


@dataclasses.dataclass(frozen=True, slots=True)
class Verdict:
    """What to do with one call: ``run`` its body (``logged``: its outcome is to be recorded),
    or answer it with the recorded ``text`` (an error the model sees when ``is_error``)."""

    run: bool
    logged: bool
    text: str = ""
    is_error: bool = False


class CallLog(Protocol):
    """What :class:`DurableToolset` calls on the history it logs into (``EventlogHistory``)."""

    async def before_call(
        self,
        messages: Sequence[ModelMessage],
        run_id: str | None,
        call_id: str | None,
        name: str,
        arguments: str,
    ) -> Verdict:
        """Log the run's messages so far and decide the call (its ``tool/call`` durable)."""

    async def after_call(self, call_id: str, value: Any, error: ToolError | None) -> None:
        """Record a finished body's outcome, durably."""


@dataclasses.dataclass
class DurableToolset(WrapperToolset[AgentDepsT]):
    """``wrapped`` with each call made crash-honest in ``history``'s session.

    Before a body runs, the run's messages so far (the model's reply proposing the call among
    them) and a ``tool/call`` are durable; when it returns, its ``tool/outcome`` (the return
    value's text, or the error it raised) is. The results reach the log as ``tool/result`` in
    the model's order when the request carrying them is recorded, as the agent loop writes them.

    Run again on a history a crash cut (``history.pending``), each call of the cut step is
    decided from the log, never run twice:

    - started and never finished (the process died in its body): the model gets
      ``TOOL_OUTCOME_UNKNOWN`` (``recovery.outcome_unknown_text``) as a failed tool result
      (``ToolFailed``: no retry budget is spent), and that is recorded as its outcome;
    - finished (its outcome logged, the result not yet sent): the recorded text, as an error
      result if the body failed;
    - never started: its body runs as usual.

    A body that raises ``ModelRetry`` or ``ToolFailed`` has that recorded as an error outcome
    and the exception passes on; any other exception is recorded (``TOOL_FAILED``) and passes on
    too (pydantic-ai fails the run). A cancelled body records nothing: it may have run.
    Deferred tools (a body raising ``ApprovalRequired`` or ``CallDeferred``) belong outside the
    wrapper: their call would be logged as started, and a resumed call answered as unknown.

    :raises ValidationError: (out of the run) the run's messages do not continue the history,
        or a message or outcome cannot be an event; nothing of that message is appended.
    """

    history: CallLog

    async def call_tool(
        self,
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[AgentDepsT],
        tool: ToolsetTool[AgentDepsT],
    ) -> Any:
        call_id = ctx.tool_call_id
        arguments = _arguments(ctx, call_id, tool_args)
        verdict = await self.history.before_call(ctx.messages, ctx.run_id, call_id, name, arguments)
        if not verdict.run:
            if verdict.is_error:
                raise ToolFailed(verdict.text)
            return verdict.text
        if not verdict.logged or call_id is None:
            return await super().call_tool(name, tool_args, ctx, tool)
        try:
            value = await super().call_tool(name, tool_args, ctx, tool)
        except (ModelRetry, ToolFailed) as exc:
            code = TOOL_ERROR if isinstance(exc, ModelRetry) else TOOL_FAILED
            error = ToolError(name=type(exc).__name__, code=code)
            await self.history.after_call(call_id, exc.message, error)
            raise
        except Exception as exc:
            error = ToolError(name=type(exc).__name__, code=TOOL_FAILED)
            await self.history.after_call(call_id, f"{type(exc).__name__}: {exc}", error)
            raise
        await self.history.after_call(call_id, value, None)
        return value


def _arguments(ctx: RunContext[Any], call_id: str | None, tool_args: dict[str, Any]) -> str:
    """The call's raw arguments as the model sent them (its part in the latest reply)."""
    for message in reversed(ctx.messages):
        if message.kind == "response":
            for call in message.tool_calls:
                if call.tool_call_id == call_id:
                    return call.args_as_json_str()
            break
    return json.dumps(tool_args, default=repr)
