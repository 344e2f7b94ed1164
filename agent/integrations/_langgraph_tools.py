"""Crash-honest tool calls for LangGraph: :class:`DurableToolNode` and :func:`durable_tool_calls`.

LangGraph's ``ToolNode`` takes wrappers around each tool call (``wrap_tool_call``,
``awrap_tool_call``: public API). The ones made here journal each call in the thread's eventlog
session, through the saver that holds it (:meth:`EventlogSaver.thread_journal`):

- before the first body of a model reply: ``turn/start`` and ``user/message`` (when the reply
  answers a human message that opened no turn yet; the open turn is ended ``completed``
  first), ``step/start`` and the reply as ``assistant/message``;
- before each body: ``tool/call``, flushed: after a crash the call is known to have started;
- after it: ``tool/outcome`` (the result's text; an error result or a raised exception as
  an error outcome), flushed; once every call of the reply has one, their ``tool/result``
  answers in the model's order and ``step/end``.

A call is decided from that journal first, so a graph resumed after a crash (``ainvoke(None,
cfg)``) never runs a body twice: a call whose ``tool/call`` is logged without an outcome (the
process died in its body) is answered with a ``ToolMessage`` of status ``error`` carrying
``TOOL_OUTCOME_UNKNOWN``'s text (``recovery.outcome_unknown_text``), recorded as its outcome; a
call with an outcome is answered with it; a call that never started runs as usual.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from eventlog import (
    AssistantMessage,
    Message,
    Session,
    StepEnd,
    StepStart,
    ToolCall,
    ToolCallPart,
    ToolError,
    ToolOutcome,
    ToolResultPart,
    TurnEnd,
    TurnStart,
    UserMessage,
)
from recovery import TOOL_FAILED, TOOL_OUTCOME_UNKNOWN, outcome_unknown_text

from ._langgraph_calls import thread_of
from ._langgraph_ledger import ToolLedger, answer, close_step, put, text_of

if TYPE_CHECKING:
    from ._langgraph_saver import EventlogSaver

__all__ = ("DurableToolNode", "durable_tool_calls")

Result = ToolMessage | Command[Any]
Execute = Callable[[ToolCallRequest], Result]
AExecute = Callable[[ToolCallRequest], Awaitable[Result]]


def durable_tool_calls(
    saver: EventlogSaver,
) -> tuple[Callable[[ToolCallRequest, Execute], Result], Callable[..., Awaitable[Result]]]:
    """The ``(wrap_tool_call, awrap_tool_call)`` pair journalling each call in ``saver``'s
    thread sessions, for a ``ToolNode`` of your own::

        wrap, awrap = durable_tool_calls(saver)
        ToolNode(tools, wrap_tool_call=wrap, awrap_tool_call=awrap)

    The sync wrapper (``graph.invoke``) journals on the store's loop from the tool's thread.
    """

    async def awrap(request: ToolCallRequest, execute: AExecute) -> Result:
        known = await _begin(saver, request)
        if known is not None:
            return known
        try:
            result = await execute(request)
        except Exception as exc:
            await _end(saver, request, f"{type(exc).__name__}: {exc}", _failed(exc))
            raise
        await _end(saver, request, *_outcome_of(result))
        return result

    def wrap(request: ToolCallRequest, execute: Execute) -> Result:
        known = saver.run_sync(_begin, saver, request)
        if known is not None:
            return known
        try:
            result = execute(request)
        except Exception as exc:
            saver.run_sync(_end, saver, request, f"{type(exc).__name__}: {exc}", _failed(exc))
            raise
        saver.run_sync(_end, saver, request, *_outcome_of(result))
        return result

    return wrap, awrap


class DurableToolNode(ToolNode):
    """LangGraph's ``ToolNode`` with every call journalled in ``saver`` (see the module):
    a drop-in, ``ToolNode(tools)`` becomes ``DurableToolNode(tools, saver)``. Its other
    arguments are ``ToolNode``'s; wrappers passed as ``wrap_tool_call``/``awrap_tool_call``
    run inside the journalled call (a retrying wrapper's attempts are one call).
    """

    def __init__(self, tools: Sequence[Any], saver: EventlogSaver, **kwargs: Any) -> None:
        wrap, awrap = durable_tool_calls(saver)
        inner_wrap = kwargs.pop("wrap_tool_call", None)
        inner_awrap = kwargs.pop("awrap_tool_call", None)
        if inner_wrap is not None:
            outer_wrap = wrap

            def wrap(request: ToolCallRequest, execute: Execute) -> Result:
                return outer_wrap(request, lambda r: inner_wrap(r, execute))

        if inner_awrap is not None:
            outer_awrap = awrap

            async def awrap(request: ToolCallRequest, execute: AExecute) -> Result:
                return await outer_awrap(request, lambda r: inner_awrap(r, execute))

        super().__init__(tools, wrap_tool_call=wrap, awrap_tool_call=awrap, **kwargs)


# -- the journal ---------------------------------------------------------------------------


async def _begin(saver: EventlogSaver, request: ToolCallRequest) -> ToolMessage | None:
    """Decide one call from the journal: ``None`` to run its body (its ``tool/call`` durable
    first), else the answer the log already holds (unknown outcome recorded here)."""
    call = request.tool_call
    call_id, name = call.get("id"), call["name"]
    config = request.runtime.config if request.runtime is not None else None
    if not call_id or config is None:
        return None  # nothing to key the call on: LangGraph's own behaviour
    session, ledger = await saver.thread_journal(thread_of(config))
    known = ledger.outcomes.get(call_id)
    if known is None and call_id in ledger.started:
        text = outcome_unknown_text(name, call_id)
        error = ToolError(name="ToolOutcomeUnknownError", code=TOOL_OUTCOME_UNKNOWN)
        known = _record_outcome(session, ledger, call_id, text, error)
    if known is not None:
        await session.flush()
        return _tool_message(known, name)
    at = ledger.call_step.get(call_id)
    if at is None:
        at = _open_step(session, ledger, _messages(request.state), call_id)
    arguments = json.dumps(call.get("args", {}), default=repr)
    put(
        session,
        ledger,
        "tool/call",
        ToolCall(turn=at[0], step=at[1], call_id=call_id, name=name, arguments=arguments),
    )
    # Durable before the body runs: after a crash the call is known to have started.
    await session.flush()
    return None


async def _end(
    saver: EventlogSaver, request: ToolCallRequest, text: str, error: ToolError | None
) -> None:
    call_id = request.tool_call.get("id")
    config = request.runtime.config if request.runtime is not None else None
    if not call_id or config is None:
        return
    session, ledger = await saver.thread_journal(thread_of(config))
    _record_outcome(session, ledger, call_id, text, error)
    await session.flush()


def _record_outcome(
    session: Session, ledger: ToolLedger, call_id: str, text: str, error: ToolError | None
) -> ToolOutcome:
    """Append the call's outcome; when it settles its step, the step's results (model's
    order) and ``step/end``."""
    turn, step = ledger.call_step[call_id]
    result = Message.tool_result(call_id, text, is_error=error is not None)
    outcome = ToolOutcome(turn=turn, step=step, call_id=call_id, result=result, error=error)
    put(session, ledger, "tool/outcome", outcome)
    if ledger.settled((turn, step)):
        answer(session, ledger, (turn, step))
        grammar = session.grammar
        if (grammar.turn, grammar.step) == (turn, step):
            put(session, ledger, "step/end", StepEnd(turn=turn, step=step))
    return outcome


def _open_step(
    session: Session, ledger: ToolLedger, messages: Sequence[BaseMessage], call_id: str
) -> tuple[int, int]:
    """Log the step of the reply proposing ``call_id`` (and its turn when it answers a new
    human message); its ``(turn, step)``."""
    reply, human = _reply_of(messages, call_id)
    grammar = session.grammar
    close_step(session, ledger)  # an earlier reply's step a call never ran in
    key = human.id if human is not None else None
    if grammar.turn is None or (key is not None and key != ledger.turn_key):
        if grammar.turn is not None:
            put(session, ledger, "turn/end", TurnEnd(turn=grammar.turn, reason="completed"))
        put(session, ledger, "turn/start", TurnStart(turn=grammar.last_turn + 1))
        if human is not None:
            message = Message.user(text_of(human.content), request_id=key)
            put(session, ledger, "user/message", UserMessage(message=message))
    opened = grammar.turn
    assert opened is not None
    turn, step = opened, grammar.last_step + 1
    put(session, ledger, "step/start", StepStart(turn=turn, step=step))
    calls = [
        ToolCallPart(
            id=c["id"] or "", name=c["name"], arguments=json.dumps(c["args"], default=repr)
        )
        for c in (reply.tool_calls if reply is not None else [])
        if c.get("id")
    ]
    if call_id not in {c.id for c in calls}:  # the call is in no reply of the state
        calls.append(ToolCallPart(id=call_id, name="", arguments="{}"))
    text = text_of(reply.content) if reply is not None else ""
    message = Message.assistant(text, tool_calls=calls)
    reply_event = AssistantMessage(turn=turn, step=step, message=message, finish="tool-calls")
    put(session, ledger, "assistant/message", reply_event)
    return turn, step


def _messages(state: Any) -> Sequence[BaseMessage]:
    if isinstance(state, list):
        return state
    if isinstance(state, dict):
        found = state.get("messages", [])
        return found if isinstance(found, list) else []
    found = getattr(state, "messages", [])
    return found if isinstance(found, list) else []


def _reply_of(
    messages: Sequence[BaseMessage], call_id: str
) -> tuple[AIMessage | None, HumanMessage | None]:
    """The reply proposing ``call_id`` and the human message it answers (the latest before)."""
    reply: AIMessage | None = None
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if reply is None and isinstance(m, AIMessage):
            if any(c.get("id") == call_id for c in m.tool_calls):
                reply = m
        elif reply is not None and isinstance(m, HumanMessage):
            return reply, m
    return reply, None


def _outcome_of(result: Result) -> tuple[str, ToolError | None]:
    """A finished body's outcome: the tool message's text, an error one as an error."""
    if isinstance(result, ToolMessage):
        text = text_of(result.content)
        if result.status == "error":
            return text, ToolError(name="ToolMessageError", code=TOOL_FAILED)
        return text, None
    return f"Command(update={result.update!r}, goto={result.goto!r})", None


def _failed(exc: Exception) -> ToolError:
    return ToolError(name=type(exc).__name__, code=TOOL_FAILED)


def _tool_message(outcome: ToolOutcome, name: str) -> ToolMessage:
    part = outcome.result.content[0]
    assert isinstance(part, ToolResultPart)
    text = part.content if isinstance(part.content, str) else json.dumps(str(part.content))
    status = "error" if outcome.error is not None else "success"
    return ToolMessage(content=text, tool_call_id=outcome.call_id, name=name, status=status)
