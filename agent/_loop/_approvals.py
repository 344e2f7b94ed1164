"""A step's calls that need a person's decision: asking, waiting, and going on (docs/approvals.md).

When a step's reply holds calls whose tool asks for approval (``@tool(approval=...)``), the
agent commits one ``tool/approval-request`` per such call and flushes, so the question is
durable before anything of the step runs; then it runs the calls that need no decision, holding
the others (:class:`~agent._loop._execution.Carry`), and the turn waits with its step open.

The decisions (``recovery.decide``) may come from this agent, from another process, or from the
``eventlog approve`` command. Once none is missing, :func:`continue_calls` rebuilds where the
step stands from the log alone and goes on: a call answered stays answered, a recorded
``tool/outcome`` is committed as its result, a call whose body may have begun is answered
``TOOL_OUTCOME_UNKNOWN`` (never run twice), a denied call ``TOOL_DENIED`` (never run), and an
approved call, or one that needed no decision and had not started, runs as any call does.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from eventlog import DEFAULT_MAX_NESTING, Session, ToolApprovalRequest, ToolCallPart, find_invalid
from projections import ToolCallState, request_header, timeline
from recovery import (
    APPROVAL_FAILED,
    TOOL_DENIED,
    TOOL_OUTCOME_UNKNOWN,
    ApprovalRecord,
    PendingApproval,
    decide,
    denied_text,
    outcome_unknown_text,
    pending_approvals,
    recorded_event,
)

from ._checks import clipped
from ._execution import Carry, ExecutionReport, ToolExecutor, carried_answer, carried_outcome
from ._tools import Toolbox

__all__ = ("Approvals", "continue_calls", "declared_tools", "run_calls", "step_calls")

logger = logging.getLogger("agent.approvals")


class _PolicyFailed(Exception):
    def __init__(self, call: ToolCallPart, exc: BaseException) -> None:
        super().__init__(call.id)
        self.call = call
        self.exc = exc


async def _reasons(toolbox: Toolbox, calls: Sequence[ToolCallPart]) -> dict[int, str]:
    """Index -> the policy's reason, for each call that needs a decision. A call of an unknown
    tool, or whose arguments do not decode, needs none: the executor answers it with an error
    without running anything.

    :raises _PolicyFailed: a tool's approval predicate raised (or answered nonsense).
    """
    reasons: dict[int, str] = {}
    for index, call in enumerate(calls):
        tool: Any = toolbox.get(call.name)
        needs = getattr(tool, "needs_approval", None)
        if needs is None:
            continue
        try:
            args = tool.decode(call.arguments)
        except Exception:
            continue  # the executor answers INVALID_ARGUMENTS
        try:
            reason = _recordable(tool, await needs(args))
        except Exception as exc:
            raise _PolicyFailed(call, exc) from exc
        if reason is not None:
            reasons[index] = reason
    return reasons


def _recordable(tool: Any, reason: object) -> str | None:
    """The policy's reason as the ``tool/approval-request`` records it: clipped, so a long one
    never makes the request too large for the log.

    Checked before any request is committed: a request the log refused half-way through the
    step's calls would leave a call that needs a decision with no question logged, and the
    step, gone on from the log, would run it without one.

    :raises TypeError: the reason is not a string (a tool's own ``needs_approval``), or one
        the log cannot hold (a lone surrogate has no UTF-8 form).
    """
    if reason is None:
        return None
    name = getattr(tool, "name", "?")
    if not isinstance(reason, str):
        raise TypeError(f"the approval reason of tool {name!r} must be a string, got {reason!r}")
    why = find_invalid(reason, max_nesting=DEFAULT_MAX_NESTING)
    if why is not None:
        raise TypeError(f"the approval reason of tool {name!r} cannot be recorded: {why}")
    return clipped(reason)


async def run_calls(
    executor: ToolExecutor, calls: Sequence[ToolCallPart], assistant_seq: int | None
) -> ExecutionReport | None:
    """Run a fresh step's calls: ask for the decisions they need (committed and flushed before
    anything runs), then run the others; ``report.held`` counts the calls left waiting.

    ``None`` when a tool's approval predicate raised: no call ran, each is answered
    ``APPROVAL_FAILED`` with a text naming the call, the step and the exception, and the turn
    is to end ``error``.

    :raises StoreWriteError: the requests could not be made durable (nothing ran).
    """
    session, turn, step = executor.session, executor.turn, executor.step
    cited = () if assistant_seq is None else (assistant_seq,)
    try:
        reasons = await _reasons(executor.toolbox, calls)
    except _PolicyFailed as failure:
        exc = failure.exc
        logger.warning("agent: approval policy of %r raised %r", failure.call.name, exc)
        text = (
            f"the approval policy of tool {failure.call.name!r} raised for call "
            f"{failure.call.id!r} of turn {turn}, step {step}: {type(exc).__name__}: {exc}; "
            "no call of this step ran"
        )
        answer = carried_answer(text, "ApprovalPolicyError", APPROVAL_FAILED, cited)
        answers = dict.fromkeys(range(len(calls)), answer)
        await executor.run(calls, assistant_seq=assistant_seq, carry=Carry(answers=answers))
        return None
    for index, reason in reasons.items():
        call = calls[index]
        request = ToolApprovalRequest(
            turn=turn,
            step=step,
            call_id=call.id,
            name=call.name,
            arguments=call.arguments,
            reason=reason,
        )
        session.append("tool/approval-request", request, sources=cited)
    if reasons:
        await session.flush()  # checkpoint: the questions are durable before anything runs
    carry = Carry(held=frozenset(reasons))
    return await executor.run(calls, assistant_seq=assistant_seq, carry=carry)


async def continue_calls(executor: ToolExecutor) -> ExecutionReport:
    """Go on with the open step once every decision it waits for is made (see the module
    docstring); calls still undecided stay held."""
    session = executor.session
    states = step_calls(session)
    proposing = await recorded_event(session, states[0].proposed or 0)
    parts = proposing.data.message.tool_calls
    by_id = {part.id: part for part in parts}
    calls = [by_id[state.call_id] for state in states]
    carry = await _carry(session, states)
    return await executor.run(calls, assistant_seq=proposing.seq, carry=carry)


def declared_tools(session: Session, toolbox: Toolbox) -> Toolbox:
    """The tools of ``toolbox`` that the open step's request declared (the request header in
    force: no request is made while the step is open).

    For a step gone on in a process other than the one that made its request: a
    ``before_step`` plan's tool set went with that process, but its names are in the log,
    and a call of a tool the request did not offer is answered ``UNKNOWN_TOOL`` as it would
    have been, never run with a tool of the agent's the model was not given.
    """
    declared = request_header(session).tools
    if declared is None:
        return toolbox
    names = {spec.name for spec in declared}
    return Toolbox([t for t in toolbox if t.name in names], where="Agent")


def step_calls(session: Session) -> list[ToolCallState]:
    """The open step's proposed calls, in the model's order."""
    found = [c for c in timeline(session).open_calls if c.index is not None]
    found.sort(key=lambda c: (c.proposed, c.index))
    return found


async def _carry(session: Session, states: Sequence[ToolCallState]) -> Carry:
    answered = 0
    while answered < len(states) and states[answered].result is not None:
        answered += 1
    held: set[int] = set()
    answers: dict[int, Any] = {}
    call_seqs: dict[int, int] = {}
    for index, state in enumerate(states[answered:], start=answered):
        if state.call is not None:
            call_seqs[index] = state.call
        status = state.status
        if status == "awaiting approval":
            held.add(index)
        elif status == "completed":
            assert state.outcome is not None
            answers[index] = carried_outcome(await recorded_event(session, state.outcome))
        elif status == "started":
            assert state.call is not None
            text = outcome_unknown_text(state.name, state.call_id)
            code = TOOL_OUTCOME_UNKNOWN
            answers[index] = carried_answer(text, "ToolOutcomeUnknownError", code, (state.call,))
        elif status == "denied":
            assert state.decided is not None
            decision = await recorded_event(session, state.decided)
            text = denied_text(state.name, state.call_id, decision.data.reason)
            sources = (state.decided,)
            answers[index] = carried_answer(text, "ToolDeniedError", TOOL_DENIED, sources)
    return Carry(answered=answered, held=frozenset(held), answers=answers, call_seqs=call_seqs)


class Approvals:
    """The agent's face for decisions (mixed into :class:`~agent.Agent`): list the waiting
    calls, approve or deny one. None needs a model call; each works on a resumed agent, and
    the decision is durable when it returns."""

    session: Session

    async def pending_approvals(self) -> tuple[PendingApproval, ...]:
        """The calls the open step waits on, in the model's order (call id, name, arguments,
        turn, step, reason, requested at, seq); empty when nothing waits."""
        return await pending_approvals(self.session)

    async def approve(self, call_id: str, *, by: str, reason: str | None = None) -> ApprovalRecord:
        """Let the waiting call ``call_id`` run; commits and flushes a ``tool/approval``.
        :meth:`~agent.Agent.run_until_idle` goes on once no call of the step waits.

        :raises ApprovalConflictError: the call was denied already (naming that decision and
            its seq); approving it again returns the first approval and commits nothing.
        :raises ApprovalError: no open step's call ``call_id`` waits for a decision.
        """
        return await decide(self.session, call_id, "approve", by=by, reason=reason)

    async def deny(self, call_id: str, *, by: str, reason: str | None = None) -> ApprovalRecord:
        """Refuse the waiting call ``call_id``: it never runs, and the model is answered
        ``TOOL_DENIED`` with ``reason``. Raises as :meth:`approve` does."""
        return await decide(self.session, call_id, "deny", by=by, reason=reason)
