"""``EventlogHooks``: the SDK's ``RunHooks`` that log a tool call before its body runs.

What the hooks call on the session they log into is listed by :class:`HookedSession`
here, so this module imports nothing of the session's: ``EventlogSession`` (which builds its
hooks) satisfies the protocol, and the two halves do not import each other.
"""

from __future__ import annotations

from typing import Any, Protocol

from agents import RunHooks

from eventlog import (
    Message,
    Session,
    ToolCall,
    ToolOutcome,
    ValidationError,
)

from ._openai_agents_approvals import record_decisions

__all__ = ("EventlogHooks", "HookedSession")


class HookedSession(Protocol):
    """What :class:`EventlogHooks` call on the session they log into (``EventlogSession``)."""

    @property
    def log(self) -> Session:
        """The eventlog session the items are events of."""

    @property
    def session_id(self) -> str:
        """Its id."""

    def log_model_output(self, items: list[dict[str, Any]]) -> int | None:
        """Log a model response's items before any tool runs; the message's seq, if any."""

    def step(self) -> tuple[int, int] | None:
        """The open ``(turn, step)``, or ``None``."""

    def end_turn(self) -> None:
        """The run ended: close the open step and turn when every call in it is answered."""

    def watched(self) -> None:
        """The hooks watch the run writing the session (its end will be seen)."""


class EventlogHooks(RunHooks[Any]):
    """Run hooks that make a crash inside a tool body honest.

    The SDK adds a model reply and its tool outputs to the session only after its tools
    return, so a process killed inside a tool leaves no trace of the call. These hooks log the
    reply (``assistant/message``) when the model returns, then a ``tool/call`` before each body
    runs, flushed before the body starts, and its ``tool/outcome`` when it returns. The next
    :meth:`EventlogSession.open` answers a call that started and never finished with
    ``TOOL_OUTCOME_UNKNOWN`` (one that never started with ``TOOL_NOT_STARTED``).

    Pass them with the session: ``Runner.run(agent, text, session=session, hooks=session.hooks)``.
    They also tell the session that its run is watched, so a run that ends without
    ``on_agent_end`` (it raised) is known to have failed when the next run starts.

    Each hook appends what it logs all or nothing: a value no event can hold (a lone
    surrogate in a reply, a result over the store's ``max_event_bytes``) raises
    :class:`~eventlog.ValidationError` out of the run and leaves the log as it was.
    """

    def __init__(self, session: HookedSession) -> None:
        self.session = session

    async def on_agent_start(self, context: Any, agent: Any) -> None:
        self.session.watched()

    async def on_llm_start(
        self, context: Any, agent: Any, system_prompt: Any, input_items: Any
    ) -> None:
        self.session.watched()

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        items = [item.model_dump(exclude_unset=True) for item in response.output]
        if self.session.log_model_output(items) is not None:
            await self.session.log.flush()

    async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
        where = self.session.step()
        call_id = getattr(context, "tool_call_id", None)
        if where is None or not isinstance(call_id, str):
            return  # not a function tool of a logged reply: nothing to make durable
        turn, step = where
        # A call that asked for approval runs on a decision taken on the RunState: durable
        # first, and a decision the log contradicts (denied there) raises before the body.
        await record_decisions(self.session.log, context, call_id=call_id)
        arguments = getattr(context, "tool_arguments", "") or ""
        call = ToolCall(turn=turn, step=step, call_id=call_id, name=tool.name, arguments=arguments)
        self.session.log.append("tool/call", call)
        # Durable before the body runs: after a crash the call is known to have started.
        await self.session.log.flush()

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: object) -> None:
        where = self.session.step()
        call_id = getattr(context, "tool_call_id", None)
        if where is None or not isinstance(call_id, str):
            return
        turn, step = where
        try:
            text = str(result)
        except Exception as exc:  # a result whose str() fails (or recurses too deep)
            raise ValidationError(
                f"session {self.session.session_id!r}: the result of tool call {call_id!r} "
                f"cannot be turned into text ({type(exc).__name__})",
                session_id=self.session.session_id,
            ) from exc
        message = Message.tool_result(call_id, text)
        outcome = ToolOutcome(turn=turn, step=step, call_id=call_id, result=message)
        self.session.log.append("tool/outcome", outcome)
        await self.session.log.flush()

    async def on_agent_end(self, context: Any, agent: Any, output: Any) -> None:
        self.session.end_turn()
        await self.session.log.flush()
