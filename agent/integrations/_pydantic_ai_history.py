"""``EventlogHistory``: a pydantic-ai ``Agent``'s message history as one eventlog session.

What ``ModelMessagesTypeAdapter`` users write by hand (dump ``result.all_messages()`` after a
run, load it before the next), made durable and readable by every eventlog tool: the messages
a run adds are core events in a turn (``_pydantic_ai_map``) plus their exact spelling, and
reopening gives back the same ``ModelMessage`` list.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pydantic_core
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
from pydantic_ai.toolsets import AbstractToolset

from eventlog import (
    Message,
    Session,
    SessionNotFoundError,
    ToolCall,
    ToolError,
    ToolOutcome,
    ValidationError,
    check_payload,
    check_room,
)
from eventlog.stores import LogStore
from projections import timeline
from recovery import TOOL_OUTCOME_UNKNOWN, outcome_unknown_text

from ._pydantic_ai_events import MESSAGE
from ._pydantic_ai_map import Append, Cursor, plan
from ._pydantic_ai_tools import DurableToolset, Verdict

__all__ = ("EventlogHistory",)


class EventlogHistory:
    """The message history of one conversation with a pydantic-ai ``Agent``, in the eventlog
    session ``log``::

        history = await EventlogHistory.open(store, "conversation-1")
        result = await agent.run(prompt, message_history=history.messages())
        await history.record(result)

    :meth:`record` appends the messages the run added and flushes: durable when it returns.
    Each message is core events (``user/message``, ``assistant/message``, ``tool/result``, in
    ``turn/start`` ... ``turn/end``, one step per model call) that ``eventlog audit``, the web
    app and recovery read, and a ``pydantic_ai/message`` event keeping it exactly as
    ``ModelMessagesTypeAdapter`` dumps it, so :meth:`messages` after a reopen equals
    ``result.all_messages()``.

    Tool calls become crash-honest when the run's tools are wrapped by :meth:`durable` (see
    :class:`DurableToolset`): each call is logged before its body runs, and a run the process
    died in is continued, not repeated (:attr:`pending`).

    :ivar log: the eventlog session.
    :ivar session_id: its id.
    """

    def __init__(
        self, log: Session, messages: list[ModelMessage], cursor: Cursor, logged: dict[str, int]
    ) -> None:
        self.log = log
        self.session_id: str = log.id
        self._messages = messages
        self._cursor = cursor
        # How many messages of each run (by pydantic-ai's run id) are recorded.
        self._logged = logged

    @classmethod
    async def open(
        cls, store: LogStore, session_id: str, *, metadata: dict[str, Any] | None = None
    ) -> EventlogHistory:
        """Open the history of ``session_id`` for writing, creating the session when it does
        not exist. Reads the session's events once (from the store if it was opened from a
        snapshot).

        :raises ValidationError: ``session_id`` is not a valid session id or ``metadata`` is
            not JSON (nothing is stored); a stored message no longer validates as a
            ``ModelMessage``.
        :raises SessionBusyError: another live writer holds the session.
        :raises CorruptLogError: the stored log is damaged.
        """
        try:
            log = await store.open(session_id)
        except SessionNotFoundError:
            log = await store.create(session_id=session_id, metadata=metadata)
        line = timeline(log)
        step = line.step
        cursor = Cursor(
            next_seq=log.head + 1,
            next_turn=line.next_turn,
            turn=None if line.turn is None else line.turn.number,
            step=None if step is None else step.number,
            next_step=line.next_step,
        )
        for call in line.open_calls:
            if call.index is not None:
                cursor.proposed[call.call_id] = call.name
            if call.result is not None:
                cursor.answered.add(call.call_id)
        dumped: list[dict[str, Any]] = []
        # The one read of the whole log: the messages, and what the open step's calls reached.
        async for event in log.read_events(0):
            if event.type == MESSAGE:
                dumped.append(event.data.message)
                if step is not None and event.seq > step.seq:
                    cursor.replied |= event.data.message.get("kind") == "response"
            elif step is not None and event.seq > step.seq and event.type == "tool/call":
                cursor.started.add(event.data.call_id)
            elif step is not None and event.seq > step.seq and event.type == "tool/outcome":
                cursor.outcomes[event.data.call_id] = event.data
        try:
            messages = ModelMessagesTypeAdapter.validate_python(dumped)
        except Exception as exc:
            raise ValidationError(
                f"session {session_id!r}: a stored pydantic-ai message does not validate ({exc})",
                session_id=session_id,
            ) from exc
        logged: dict[str, int] = {}
        for message in dumped:
            run_id = message.get("run_id")
            if isinstance(run_id, str):
                logged[run_id] = logged.get(run_id, 0) + 1
        return cls(log, messages, cursor, logged)

    def messages(self) -> list[ModelMessage]:
        """The history: every message recorded, oldest first (a new list; pass it as
        ``message_history``)."""
        return list(self._messages)

    @property
    def pending(self) -> bool:
        """Whether the history ends in calls no tool result answers: a run the process died in
        (or one paused on deferred calls). Continue it with ``agent.run(None,
        message_history=history.messages(), ...)``: pydantic-ai refuses a new prompt then."""
        return bool(self._cursor.dangling)

    def durable(self, toolset: AbstractToolset[Any]) -> DurableToolset[Any]:
        """``toolset`` made crash-honest on this history (a :class:`DurableToolset`)."""
        return DurableToolset(toolset, self)

    async def record(self, run: Any) -> None:
        """Append the messages a run added to the history, close its turn, and flush.

        ``run`` is the run's result (anything with ``all_messages()`` and ``run_id``:
        ``AgentRunResult``, a streamed result) or the run's message list. The run's messages
        are those carrying its ``run_id`` (a list's: its last message's), so a history a
        capability trimmed or rewrote for the model (``ProcessHistory``) records the same; the
        run must continue this history: the last message recorded is among the messages it was
        given (run the agent with ``message_history=history.messages()``). A list of messages
        with no run id must start with the whole history. The messages already recorded, by a
        :class:`DurableToolset` during the run or an earlier ``record``, are not recorded again,
        so recording the same result twice adds nothing. A run paused on deferred calls keeps
        its turn open.

        :raises ValidationError: ``run`` is neither; its messages do not continue this
            history; a message holds what no event can (a lone surrogate, an event over the
            store's ``max_event_bytes``). Nothing is appended then.
        """
        messages, run_id = _run_messages(run)
        self._log(run_id, self._new(messages, run_id), close=True)
        await self.log.flush()

    # -- what the durable toolset calls ----------------------------------------------------

    async def before_call(
        self,
        messages: Sequence[ModelMessage],
        run_id: str | None,
        call_id: str | None,
        name: str,
        arguments: str,
    ) -> Verdict:
        """Log the run's messages so far, then decide one call: run it (its ``tool/call``
        durable first), or answer it with what the log knows (a recorded outcome; for a call
        that started and never finished, ``TOOL_OUTCOME_UNKNOWN``, recorded as its outcome)."""
        self._log(run_id, self._new(messages, run_id), close=False)
        at = self._cursor
        if call_id is None or at.turn is None or at.step is None or call_id not in at.proposed:
            await self.log.flush()
            return Verdict(run=True, logged=False)
        outcome = at.outcomes.get(call_id)
        if outcome is None and call_id in at.started:
            text = outcome_unknown_text(name, call_id)
            error = ToolError(name="ToolOutcomeUnknownError", code=TOOL_OUTCOME_UNKNOWN)
            outcome = self._append_outcome(call_id, text, error)
        if outcome is not None:
            await self.log.flush()
            part = outcome.result.tool_results[0]
            return Verdict(run=False, logged=True, text=part.text, is_error=part.is_error)
        self._append(
            Append(
                "tool/call",
                ToolCall(
                    turn=at.turn, step=at.step, call_id=call_id, name=name, arguments=arguments
                ),
            )
        )
        at.started.add(call_id)
        # Durable before the body runs: after a crash the call is known to have started.
        await self.log.flush()
        return Verdict(run=True, logged=True)

    async def after_call(self, call_id: str, value: Any, error: ToolError | None) -> None:
        """Record a finished body's outcome (its return value, or the error text) and flush.

        :raises ValidationError: the outcome cannot be an event (over ``max_event_bytes``, a
            lone surrogate): the call stays started, so a rerun is told its outcome is unknown.
        """
        self._append_outcome(call_id, _text(value), error)
        await self.log.flush()

    # -- appending -------------------------------------------------------------------------

    def _new(self, messages: Sequence[ModelMessage], run_id: str | None) -> list[ModelMessage]:
        """The messages of run ``run_id`` not recorded yet (with no run id: those after the
        history, which ``messages`` must start with), checked to continue the history."""
        held = self._messages
        if run_id is None:
            n = len(held)
            if len(messages) >= n and (not n or messages[n - 1] == held[-1]):
                return list(messages[n:])
            raise self._discontinued(len(messages))
        new = [m for m in messages if m.run_id == run_id]
        already = self._logged.get(run_id, 0)
        if already:
            # Part of this run is recorded already: the history must end in that part.
            if held and new[already - 1 : already] == held[-1:]:
                return new[already:]
        elif not held or any(m == held[-1] for m in reversed(messages) if m.run_id != run_id):
            return new
        raise self._discontinued(len(messages))

    def _discontinued(self, count: int) -> ValidationError:
        return ValidationError(
            f"session {self.session_id!r}: the run's {count} messages do not continue its "
            f"history of {len(self._messages)}: run the agent with "
            "message_history=history.messages()",
            session_id=self.session_id,
        )

    def _log(self, run_id: str | None, new: list[ModelMessage], *, close: bool) -> None:
        try:
            dumped = ModelMessagesTypeAdapter.dump_python(new, mode="json")
        except Exception as exc:
            raise ValidationError(
                f"session {self.session_id!r}: a message does not serialize ({exc})",
                session_id=self.session_id,
            ) from exc
        self._cursor.next_seq = self.log.head + 1
        appends, after = plan(self._cursor, new, dumped, close=close)
        self._append(*appends)
        self._cursor = after
        self._messages.extend(new)
        if run_id is not None:
            self._logged[run_id] = self._logged.get(run_id, 0) + len(new)

    def _append_outcome(self, call_id: str, text: str, error: ToolError | None) -> ToolOutcome:
        at = self._cursor
        assert at.turn is not None and at.step is not None
        result = Message.tool_result(call_id, text, is_error=error is not None)
        outcome = ToolOutcome(
            turn=at.turn, step=at.step, call_id=call_id, result=result, error=error
        )
        self._append(Append("tool/outcome", outcome))
        at.outcomes[call_id] = outcome
        return outcome

    def _append(self, *appends: Append) -> None:
        """Append all or nothing: every payload is checked before the first is appended."""
        log = self.log
        sizes = [check_payload(log, a.type, a.data) for a in appends]
        check_room(log, sizes)
        for a in appends:
            log.append(a.type, a.data, surface=a.surface, sources=a.sources)

    def __repr__(self) -> str:
        return f"EventlogHistory({self.session_id!r}, messages={len(self._messages)})"


def _run_messages(run: Any) -> tuple[Sequence[ModelMessage], str | None]:
    """A run's messages and its run id."""
    all_messages = getattr(run, "all_messages", None)
    messages = all_messages() if callable(all_messages) else run
    if not isinstance(messages, list | tuple):
        raise ValidationError(
            f"record() takes a run's result or its message list, got {type(run).__name__}"
        )
    for i, message in enumerate(messages):
        if getattr(message, "kind", None) not in ("request", "response"):
            raise ValidationError(
                f"record(): item {i} is a {type(message).__name__}, not a pydantic-ai ModelMessage"
            )
    run_id = getattr(run, "run_id", None) if callable(all_messages) else None
    if run_id is None and messages:
        run_id = messages[-1].run_id
    return messages, run_id if isinstance(run_id, str) else None


def _text(value: Any) -> str:
    """A tool's return value as the text its outcome records (JSON for what is not a string)."""
    if isinstance(value, str):
        return value
    return pydantic_core.to_json(value, fallback=repr).decode()
