"""The SDK's ``needs_approval`` tools on an ``EventlogSession``: a run paused for a person,
kept across a restart.

The SDK pauses a run whose model asked for a tool that needs approval: ``Runner.run`` returns
with ``result.interruptions`` and nothing of those calls runs; the run goes on when the app
passes the run's ``RunState`` (``result.to_state()``), with a decision on each call, back to
``Runner.run``. The state lives in the app's memory, so a restart loses the pause. Here:

- :meth:`ApprovalsMixin.save_interruption` keeps it in the log: one core
  ``tool/approval-request`` per interrupted call (so ``eventlog approvals``, ``approve``,
  ``deny``, ``audit`` and the web app see the question) and one ``openai_agents/run-state``
  holding ``RunState.to_json()``, flushed together;
- :meth:`ApprovalsMixin.pending_run` rebuilds the ``RunState`` in any process, the decisions
  recorded in the log (``eventlog approve``/``deny``, :meth:`ApprovalsMixin.approve`/``deny``,
  another process) applied to it: an approved call runs, a denied one is answered without
  running;
- :func:`record_decisions` records, as ``tool/approval`` events, the decisions the app took on
  the SDK's own state (``state.approve(item)``), when the resumed run first shows them (the
  hooks' ``on_tool_start``, before the body; the session's first call). A decision that
  contradicts the log's raises :class:`~recovery.ApprovalConflictError` there: a call the log
  denied never runs.

Imports the SDK only in :meth:`ApprovalsMixin.pending_run`.
"""

from __future__ import annotations

from typing import Any

from eventlog import (
    ApprovalDecision,
    Session,
    ToolApprovalRequest,
    ValidationError,
    check_payload,
    check_room,
    needs_extra,
)
from projections import ToolCallState, timeline
from recovery import ApprovalRecord, PendingApproval, decide, denied_text, pending_approvals

from ._openai_agents_events import RUN_STATE, SavedRunState
from ._openai_agents_runs import resumes
from ._types import shown

__all__ = (
    "NEEDS_APPROVAL",
    "SDK_DECIDER",
    "ApprovalsMixin",
    "record_decisions",
    "refuse_new_run",
)

#: The ``reason`` of a ``tool/approval-request`` logged for an SDK interruption.
NEEDS_APPROVAL = "the tool's needs_approval"
#: ``by`` of a decision taken on the SDK's ``RunState`` (``state.approve(item)``), which names
#: nobody: decide through the session (or ``eventlog approve``) to record who.
SDK_DECIDER = "openai-agents RunState"


class ApprovalsMixin:
    """The approval half of ``EventlogSession`` (whose :attr:`log` it writes)."""

    log: Session

    async def save_interruption(
        self, result: Any, *, context_serializer: Any = None, strict_context: bool = False
    ) -> tuple[PendingApproval, ...]:
        """Keep the pause of an interrupted run durably; return the calls waiting for a
        decision (empty, and nothing written, when ``result`` holds no interruption).

        ``result`` is what ``Runner.run`` returned (or its ``RunState``). Appends one
        ``tool/approval-request`` per interrupted call not asked about yet (a call asked before,
        which a resumed run interrupts again, is not asked twice) and an
        ``openai_agents/run-state`` with ``RunState.to_json(context_serializer=...,
        strict_context=...)``, checked all or nothing, then flushes. Call it before anything
        else touches the session: until it returns, a crash loses the pause (the calls are
        left unanswered in the open step, as an app's own history is).

        :raises ValidationError: ``result`` is neither a run's result nor a ``RunState``, an
            interruption is not a function tool's call (hosted MCP,
            shell and computer approvals are not kept), its call is not a call of the session's
            open step (the run was not given this session), or the state is over the store's
            ``max_event_bytes``; nothing was written.
        :raises UserError: (the SDK's) the state does not serialize (a context that is not a
            mapping, without ``context_serializer``).
        """
        log = self.log
        state = result.to_state() if callable(getattr(result, "to_state", None)) else result
        if not callable(getattr(state, "get_interruptions", None)):
            raise ValidationError(
                f"session {log.id!r}: save_interruption takes what Runner.run returned or its "
                f"RunState, got {shown(result)}",
                session_id=log.id,
            )
        interruptions = state.get_interruptions()
        if not interruptions:
            return ()
        line = timeline(log)
        if line.step is None:
            raise ValidationError(
                f"session {log.id!r}: the interrupted run has no open step here: was it run "
                "with this session?",
                session_id=log.id,
            )
        calls = {call.call_id: call for call in line.open_calls}
        asks: list[ToolApprovalRequest] = []
        for item in interruptions:
            call_id, name, arguments = _function_call(log.id, item)
            call = calls.get(call_id)
            if call is None:
                raise ValidationError(
                    f"session {log.id!r}: interrupted call {call_id!r} ({name}) is not a call "
                    f"of the open step (turn {line.step.turn}, step {line.step.number})",
                    session_id=log.id,
                )
            if call.requested is None and all(ask.call_id != call_id for ask in asks):
                asks.append(
                    ToolApprovalRequest(
                        turn=call.turn,
                        step=call.step,
                        call_id=call_id,
                        name=name,
                        arguments=arguments,
                        reason=NEEDS_APPROVAL,
                    )
                )
        saved = SavedRunState(
            turn=line.step.turn,
            step=line.step.number,
            calls=[_function_call(log.id, item)[0] for item in interruptions],
            state=state.to_json(
                context_serializer=context_serializer, strict_context=strict_context
            ),
        )
        sizes = [check_payload(log, "tool/approval-request", ask) for ask in asks]
        sizes.append(check_payload(log, RUN_STATE, saved))
        check_room(log, sizes)
        for ask in asks:
            proposed = calls[ask.call_id].proposed
            log.append("tool/approval-request", ask, sources=(proposed,) if proposed else ())
        log.append(RUN_STATE, saved)
        await log.flush()
        return await pending_approvals(log)

    async def pending_run(
        self,
        agent: Any,
        *,
        context_override: Any = None,
        context_deserializer: Any = None,
        strict_context: bool = False,
    ) -> Any:
        """The ``RunState`` of the run paused in the open step, with every decision the log
        holds applied (``approve``; ``deny`` as ``reject`` with the ``TOOL_DENIED`` text, the
        reason in it, as the model's answer), or ``None`` when no saved run waits (nothing
        paused, or its calls were all answered). Calls still undecided stay in
        ``state.get_interruptions()``: decide them on the state (recorded when the run
        resumes) or through the session first. Resume with ``Runner.run(agent, state,
        session=session, hooks=session.hooks)``.

        ``agent`` is the run's starting agent, the options go to ``RunState.from_json``.

        :raises ValidationError: a call the saved state would run again has started since it
            was saved (its body may have run: a run resumed from this state was cut without
            saving its own pause); nothing was changed.
        :raises MissingExtraError: the ``openai-agents`` extra is not installed.
        """
        log = self.log
        line = timeline(log)
        asked = line.approvals
        if line.step is None or all(call.result is not None for call in asked):
            return None
        step = (line.step.turn, line.step.number)
        saved: SavedRunState | None = None
        first = min(call.requested for call in asked if call.requested is not None)
        async for event in log.read_events(first):
            if event.type == RUN_STATE and (event.data.turn, event.data.step) == step:
                saved = event.data
        if saved is None:
            return None  # the calls were asked by another writer (the agent loop)
        with needs_extra("openai-agents", "EventlogSession.pending_run", "agents"):
            from agents import RunState
        state = await RunState.from_json(
            agent,
            saved.state,
            context_override=context_override,
            context_deserializer=context_deserializer,
            strict_context=strict_context,
        )
        calls = {call.call_id: call for call in line.open_calls}
        for item in state.get_interruptions():
            call_id, name, _ = _function_call(log.id, item)
            call = calls.get(call_id)
            if call is not None and (call.call is not None or call.result is not None):
                raise ValidationError(
                    f"session {log.id!r}: the saved run would run call {call_id!r} ({name}) "
                    f"again, which has {call.status} since (seq {call.call or call.result})",
                    session_id=log.id,
                )
            if call is None or call.decided is None:
                continue
            (event,) = await log.events(call.decided, limit=1)
            if event.data.decision == "approve":
                state.approve(item)
            else:
                state.reject(item, rejection_message=denied_text(name, call_id, event.data.reason))
        return state

    async def pending_approvals(self) -> tuple[PendingApproval, ...]:
        """The open step's calls waiting for a decision (``recovery.pending_approvals``)."""
        return await pending_approvals(self.log)

    async def approve(self, call: Any, *, by: str, reason: str | None = None) -> ApprovalRecord:
        """Record and flush an ``approve`` of the waiting call ``call`` (a call id, or the SDK's
        ``ToolApprovalItem``); :meth:`pending_run` applies it. ``recovery.decide`` says what is
        raised (a second, different decision: ``ApprovalConflictError``)."""
        return await self._decide(call, "approve", by, reason)

    async def deny(self, call: Any, *, by: str, reason: str | None = None) -> ApprovalRecord:
        """Record and flush a ``deny``: the call never runs; the model is told, with
        ``reason``. As :meth:`approve`."""
        return await self._decide(call, "deny", by, reason)

    async def _decide(
        self, call: Any, decision: ApprovalDecision, by: str, reason: str | None
    ) -> ApprovalRecord:
        call_id = call if isinstance(call, str) else _function_call(self.log.id, call)[0]
        return await decide(self.log, call_id, decision, by=by, reason=reason)


async def record_decisions(log: Session, context: Any, *, call_id: str | None = None) -> None:
    """Record the decisions the SDK run ``context`` holds on the open step's calls that asked
    for one and have no answer (only ``call_id`` when given), by :data:`SDK_DECIDER`.

    A decision already recorded is left as it is (the same one again is a no-op).

    :raises ApprovalConflictError: the run holds the other decision than the log's (the log's
        stands: the caller raises out of the run before the call runs).
    """
    decided = getattr(context, "is_tool_approved", None)
    if not callable(decided):
        return
    for call in timeline(log).approvals:
        if call.result is not None or (call_id is not None and call.call_id != call_id):
            continue
        verdict = decided(call.name, call.call_id)
        if verdict is None:
            continue
        reason = None if verdict else _rejection(context, call)
        await decide(
            log, call.call_id, "approve" if verdict else "deny", by=SDK_DECIDER, reason=reason
        )


def refuse_new_run(log: Session, context: Any) -> None:
    """Refuse a new run (``context`` is its ``RunContextWrapper``) while calls of the open
    step asked for a decision and have no answer, unless it resumes the paused run (it holds
    a decision on one of them). A new run would leave them unanswered in a closed step, and
    its model request would hold calls with no output.

    :raises ValidationError: naming the waiting calls; nothing was written.
    """
    waiting = [call for call in timeline(log).approvals if call.result is None]
    if not waiting or resumes(log, context):
        return
    named = ", ".join(f"{call.call_id!r} ({call.name})" for call in waiting)
    raise ValidationError(
        f"session {log.id!r}: a paused run waits for a decision on {named} (turn "
        f"{waiting[0].turn}, step {waiting[0].step}): resume it first (pending_run; deny "
        "what must not run)",
        session_id=log.id,
    )


def _rejection(context: Any, call: ToolCallState) -> str | None:
    """The message the app gave ``state.reject``, if the SDK tells it."""
    message = getattr(context, "get_rejection_message", None)
    text = message(call.name, call.call_id) if callable(message) else None
    return text if isinstance(text, str) else None


def _function_call(session_id: str, item: Any) -> tuple[str, str, str]:
    """``(call_id, name, arguments)`` of an SDK ``ToolApprovalItem`` for a function tool."""
    raw = getattr(item, "raw_item", None)
    fields = [
        raw.get(key) if isinstance(raw, dict) else getattr(raw, key, None)
        for key in ("call_id", "name", "arguments")
    ]
    name = getattr(item, "tool_name", None) or fields[1]
    call_id, arguments = fields[0], fields[2]
    if not (isinstance(call_id, str) and isinstance(name, str) and isinstance(arguments, str)):
        raise ValidationError(
            f"session {session_id!r}: the interruption {shown(raw)} is not a function tool's "
            "call; only function tools' approvals are kept",
            session_id=session_id,
        )
    return call_id, name, arguments
