"""``EventlogSession``: the OpenAI Agents SDK's ``Session`` protocol on one eventlog session.

Imports no SDK: the protocol is structural, so the session (and a reader of its events) works
whether the extra is installed or not.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio

from eventlog import (
    APPEND,
    EventLogError,
    Message,
    MessageSource,
    Session,
    SessionNotFoundError,
    StepEnd,
    StepStart,
    ToolResultPart,
    TurnEnd,
    TurnStart,
    ValidationError,
    check_payload,
    check_room,
    needs_extra,
    new_id,
)
from eventlog.stores import LogStore
from projections import timeline, to_openai_responses
from recovery import repair

from ._openai_agents_approvals import ApprovalsMixin, record_decisions, refuse_new_run
from ._openai_agents_events import CLEAR, ITEMS, POP, Cleared, Items, Popped, SessionItems
from ._openai_agents_items import assistant_parts as _assistant_parts
from ._openai_agents_items import checked as _checked
from ._openai_agents_items import core as _core
from ._openai_agents_items import groups as _groups
from ._openai_agents_items import kind as _kind
from ._openai_agents_items import same as _same
from ._openai_agents_items import user_parts as _user_parts
from ._openai_agents_runs import HOOKED as _HOOKED
from ._openai_agents_runs import RunWatch, close_left, close_turn, reason_of, resumes
from ._openai_agents_runs import interrupted as _interrupted
from ._openai_agents_runs import replied as _replied

__all__ = ("EventlogSession",)

_logger = logging.getLogger(__name__)

_MODEL = MessageSource(kind="model")
_USER = MessageSource(kind="user")
_TOOL = MessageSource(kind="tool")
#: An upper bound of the stored payload of a turn or step event (``{"turn":N,"reason":...}``).
_BOUNDARY_BYTES = 64


class EventlogSession(ApprovalsMixin):
    """An SDK ``Session`` whose items are events of the eventlog session ``log``.

    User messages, assistant messages, function calls and their string outputs are core
    events (``user/message``, ``assistant/message``, ``tool/result``) inside ``turn/start`` /
    ``step/start`` boundaries, so projections, recovery, ``eventlog audit`` and ``replay`` read
    them unchanged; whatever the conversion back would not reproduce exactly, and items with no
    core equivalent, are kept in ``openai_agents/items`` events. ``get_items`` therefore returns
    exactly the items added, in order. ``pop_item`` and ``clear_session`` are events: nothing
    is ever deleted.

    Every mutation is durable when it returns (it flushes). Pass :attr:`hooks` (an
    :class:`EventlogHooks`) to ``Runner.run`` to log each tool call before its body runs.
    A run paused for approval is kept by :meth:`save_interruption` and resumed, in any
    process, from :meth:`pending_run` (:class:`ApprovalsMixin`).

    :ivar session_id: the eventlog session id.
    :ivar session_settings: the SDK's settings (``limit`` is the default of ``get_items``).
    """

    def __init__(self, log: Session, *, session_settings: Any = None) -> None:
        self.log = log
        self.session_id: str = log.id
        self.session_settings = session_settings
        self._fold = SessionItems()
        # Items the hooks already logged as a core event (seq), awaiting the SDK's add_items.
        self._prelogged: list[tuple[int, list[dict[str, Any]]]] = []
        self._runs = RunWatch()

    @classmethod
    async def open(
        cls,
        store: LogStore,
        session_id: str,
        *,
        metadata: dict[str, Any] | None = None,
        session_settings: Any = None,
    ) -> EventlogSession:
        """Open ``session_id`` for writing, creating it when it does not exist.

        A run a crash interrupted (its input got no model reply, or the hooks logged a reply or
        a tool call the SDK never added) is repaired first (``recovery.repair``, the turn
        closed ``interrupted``): each tool call the log shows started gets a
        ``function_call_output`` saying its outcome is unknown (``TOOL_OUTCOME_UNKNOWN``), each
        proposed call that never started one saying so (``TOOL_NOT_STARTED``), so the model is
        told rather than left to repeat them.

        The session is opened with the default (snapshot) open: the latest snapshot and the
        events after it, the chain verified from the snapshot on. The timeline a snapshot
        restores keeps the open step and every unanswered call, so the crash check and the
        repair need nothing older; ``get_items`` reads older events from the store.

        :raises ValidationError: ``session_id`` is not a valid session id (a final newline, a
            lone surrogate, over 128 characters, ...: ids are never rewritten) or ``metadata``
            is not JSON; refused before anything is stored.
        :raises SessionBusyError: another live writer holds the session.
        :raises CorruptLogError: the stored log is damaged (from the snapshot on).
        """
        try:
            log = await store.open(session_id)
        except SessionNotFoundError:
            log = await store.create(session_id=session_id, metadata=metadata)
        if await _interrupted(log):
            await repair(log)
        return cls(log, session_settings=session_settings)

    @property
    def hooks(self) -> Any:
        """``EventlogHooks`` for this session (imports the SDK).

        :raises MissingExtraError: the ``openai-agents`` extra is not installed.
        """
        with needs_extra("openai-agents", "EventlogSession.hooks", "agents"):
            from ._openai_agents_hooks import EventlogHooks

        return EventlogHooks(self)

    async def get_items(self, limit: int | None = None, *, wrapper: Any = None) -> list[Any]:
        """The live items, oldest first; with ``limit`` (else ``session_settings.limit``) the
        latest ``limit`` of them.

        Without a limit the item list is a fold over the whole log: the first call after the
        session was opened from a snapshot streams the events before it from the store (once;
        later calls fold only what was appended since). With a limit, until that fold exists,
        only the end of the log is read: a window of events from the head, widened until it
        holds ``limit`` items (or reaches the start, or a ``clear``).

        ``wrapper`` (as on every method) is the SDK run's ``RunContextWrapper``, which the
        ``Runner`` passes: the first call of a new run closes the turn the previous run left
        open (see :meth:`add_items`), so the items returned include its answers.
        """
        await self._enter(wrapper)
        if limit is None and self.session_settings is not None:
            limit = getattr(self.session_settings, "limit", None)
        if limit is not None and type(limit) is not int:
            raise ValidationError(
                f"get_items limit must be an int or None, got `{type(limit).__name__}`"
            )
        if limit is None:
            return [dict(item) for item in await self._items()]
        if limit <= 0:
            return []
        return [dict(item) for item in await self._latest(limit)]

    async def add_items(self, items: list[Any], *, wrapper: Any = None) -> None:
        """Append ``items`` (Responses-API input items); durable when it returns.

        A run's items (``wrapper`` is the ``RunContextWrapper`` the ``Runner`` passes) go in a
        turn: its input opens one, each model reply a step. The first call of a new run first
        closes the turn the previous run left open: a run that raised (the hooks saw no
        ``on_agent_end``) is closed ``error``, ``aborted`` if its task was cancelled, its
        unanswered calls answered as recovery answers them; so the new run starts turn N+1 at
        step 1. Input an app adds outside any run (no ``wrapper``) opens no turn: it waits for
        the run that answers it, and nothing in the log says a run was cut.

        All or nothing: every event the call appends is built and checked before the first is
        appended, so a refused call appends nothing and a retry adds no copy.

        :raises ValidationError: ``items`` is not a list of JSON objects, or an item holds what
            no event can (NaN or infinity, bytes, an int beyond 64 bits, a lone surrogate, a
            key that is not a string, nesting past the store's limit) or makes an event over
            the store's ``max_event_bytes``; the message names the item's path.
        """
        checked = _checked(items)
        # The previous run's turn is closed whatever this call's items turn out to be.
        await self._enter(wrapper)
        staged = [self._stage(kind, group) for kind, group in _groups(checked)]
        self._check(staged)
        for entry in staged:
            self._log_group(entry, in_run=self._runs.running)
        await self.log.flush()

    async def pop_item(self, *, wrapper: Any = None) -> Any:
        """Remove and return the latest item (``None`` when there is none), by an
        ``openai_agents/pop`` event. Reads only the end of the log (see :meth:`get_items`)."""
        await self._enter(wrapper)
        items = await self._latest(1)
        if not items:
            return None
        item = dict(items[-1])
        self.log.append(POP, Popped(item=item))
        await self.log.flush()
        return item

    async def clear_session(self, *, wrapper: Any = None) -> None:
        """Empty the item list by an ``openai_agents/clear`` event (the log keeps everything)."""
        await self._enter(wrapper)
        self._close_turn()
        self.log.append(CLEAR, Cleared())
        self._prelogged.clear()
        await self.log.flush()

    async def _items(self) -> list[dict[str, Any]]:
        """The whole live list (not a copy), the fold brought up to the head."""
        fold = self._fold
        if fold.next_seq <= self.log.head:
            async for event in self.log.read_events(fold.next_seq):
                fold.apply(event)
        return fold.items

    async def _latest(self, limit: int) -> list[dict[str, Any]]:
        """The last ``limit`` live items (fewer when there are fewer)."""
        if self._fold.next_seq > 0 or self.log.loaded_from == 0:
            # The whole fold exists, or costs no read from the store: use it.
            items = await self._items()
            return items[max(0, len(items) - limit) :]
        stop, window = self.log.head + 1, 4 * limit + 64
        while True:
            start = max(0, stop - window)
            # A fold from ``start`` gives the list's last items exactly (see SessionItems).
            fold = SessionItems()
            async for event in self.log.read_events(start, stop - start):
                fold.apply(event)
            if start == 0 or fold.cleared or len(fold.items) >= limit:
                return fold.items[max(0, len(fold.items) - limit) :]
            window *= 4

    # -- what the hooks call ------------------------------------------------------------

    def log_model_output(self, items: list[dict[str, Any]]) -> int | None:
        """Log a model response's items as an ``assistant/message`` before any tool runs (the
        SDK adds them only after its tools return); the SDK's later ``add_items`` of the same
        items then records only their exact spelling. Returns the message's seq."""
        core = [item for item in _checked(items) if _kind(item) == "assistant"]
        if not core:
            return None
        entry = self._stage("assistant", core, id=_HOOKED + new_id(), spell=False)
        self._check([entry])  # before the step it opens: a refused reply leaves no trace
        seq = self._log_assistant(entry)
        self._prelogged.append((seq, core))
        return seq

    def step(self) -> tuple[int, int] | None:
        """The open ``(turn, step)``, or ``None``."""
        line = timeline(self.log)
        return None if line.step is None else (line.step.turn, line.step.number)

    def end_turn(self) -> None:
        """The run ended (``on_agent_end``): close the open step and turn (``completed``) when
        every call in it is answered."""
        self._runs.ended = True
        self._close_turn()

    def watched(self) -> None:
        """The hooks watch the run writing the session (``on_agent_start``, ``on_llm_start``):
        its end will be seen, so a turn it leaves open when the next run starts failed."""
        if self._runs.running:
            self._runs.hooked = True

    @asynccontextmanager
    async def guard(self) -> AsyncIterator[None]:
        """Close the running turn at once when the block raises, with the exception's reason:
        ``aborted`` for a cancellation (also one a cancel scope around the run catches, which
        the session cannot see on its own), ``blocked`` for ``MaxTurnsExceeded`` and guardrail
        tripwires, ``error`` otherwise. The exception propagates unchanged. Optional: without
        it the next run closes the turn (``error``, or ``aborted`` when the run's task was
        cancelled)::

            async with session.guard():
                await Runner.run(agent, text, session=session, hooks=session.hooks)
        """
        try:
            yield
        except BaseException as error:
            if self._runs.running:
                self._runs.ended = True
                try:
                    with anyio.CancelScope(shield=True):  # written, cancelled or not
                        await close_turn(self.log, reason_of(error))
                except EventLogError:
                    # The run's own exception is the one to see; the turn stays open for the
                    # next run (or open) to close.
                    _logger.exception("could not close the turn of %r", self.session_id)
            raise

    async def _enter(self, wrapper: Any) -> None:
        """A call of the run ``wrapper``: when it starts a new run, close what the previous
        one left open. A new run is refused while a paused run waits (see
        :func:`refuse_new_run`)."""
        if self._runs.is_new(wrapper):
            refuse_new_run(self.log, wrapper)
        left = self._runs.enter(wrapper)
        if left is None:
            return
        # A run resumed from a RunState: the decisions taken on it are the log's first.
        await record_decisions(self.log, wrapper)
        if left.tracked and resumes(self.log, wrapper):
            self._runs.resume(left)  # the paused run goes on: its turn stays open
        else:
            await close_left(self.log, left)

    # -- mapping ------------------------------------------------------------------------

    def _stage(
        self, kind: str, group: list[dict[str, Any]], *, id: str | None = None, spell: bool = True
    ) -> _Staged:
        """What a group will append, built before anything is (see :meth:`_check`)."""
        message: Message | None = None
        if kind == "user":
            message = Message(id=new_id(), role="user", content=_user_parts(group[0]), source=_USER)
        elif kind == "assistant":
            message = Message(
                id=id or new_id(), role="assistant", content=_assistant_parts(group), source=_MODEL
            )
        elif kind == "output":
            part = ToolResultPart(call_id=group[0]["call_id"], content=group[0]["output"])
            message = Message(id=new_id(), role="tool", content=(part,), source=_TOOL)
        # The exact items are kept too when the core event does not say them as given.
        spelled = spell and (
            message is None or to_openai_responses([message], degrade="text") != group
        )
        return _Staged(kind, group, message, spelled)

    def _check(self, staged: list[_Staged]) -> None:
        """Check every payload ``staged`` will append, as ``append`` will: the turn, step and
        seq numbers the events get are at most ``bound`` (a few events per group), so the
        sizes checked are at least the real ones; then that the write backlog takes them all
        (the turn and step events around them counted at :data:`_BOUNDARY_BYTES` each)."""
        log = self.log
        bound = log.head + 1 + 6 * len(staged)
        sizes: list[int] = []
        for entry in staged:
            sizes += [_BOUNDARY_BYTES] * 4  # at most: a turn closed and opened, a step too
            message = entry.message
            if message is not None:
                type_, data = _core(entry.kind, bound, bound, message)
                sizes.append(check_payload(log, type_, data))
            # A reply the hooks logged first is spelled whatever the conversion gives.
            if entry.spelled or entry.kind == "assistant":
                of = None if message is None else bound
                sizes.append(check_payload(log, ITEMS, Items(items=entry.group, of=of)))
        check_room(log, sizes)

    def _log_group(self, entry: _Staged, *, in_run: bool) -> None:
        kind, group, message = entry.kind, entry.group, entry.message
        if kind == "user":
            assert message is not None
            # New input after a model reply starts a new turn; input before any reply (several
            # input items of one run) belongs to the turn it opened. Only a run's input opens
            # one: a turn is what a run does.
            line = timeline(self.log)
            if line.step is None or _replied(self.log, line.step.seq):
                self._close_turn()
            if in_run or timeline(self.log).turn is not None:
                self._open_step(new=False)
            self._append_core(entry, *_core(kind, 0, 0, message))
        elif kind == "assistant":
            if self._prelogged and _same(self._prelogged[0][1], group):
                seq, _ = self._prelogged.pop(0)
                self._spell(seq, group)
            else:
                self._log_assistant(entry)
        elif kind == "output":
            assert message is not None
            turn, step = self._open_step(new=False)
            self._append_core(entry, *_core(kind, turn, step, message))
        else:
            self.log.append(ITEMS, Items(items=group))

    def _log_assistant(self, entry: _Staged) -> int:
        assert entry.message is not None
        turn, step = self._open_step(new=True)
        return self._append_core(entry, *_core("assistant", turn, step, entry.message))

    def _append_core(self, entry: _Staged, type_: str, data: Any) -> int:
        seq = self.log.append(type_, data, surface=APPEND).seq
        if entry.spelled:
            self._spell(seq, entry.group)
        return seq

    def _spell(self, seq: int, group: list[dict[str, Any]]) -> None:
        # The SDK's own spelling of the core event at seq: what get_items must give back.
        self.log.append(ITEMS, Items(items=group, of=seq), sources=(seq,))

    def _open_step(self, *, new: bool) -> tuple[int, int]:
        """The open step, opening a turn and a step when none is open. With ``new``, a step
        that already holds a model reply is closed and the next one opened (one model call
        per step)."""
        line = timeline(self.log)
        if line.turn is None:
            self.log.append("turn/start", TurnStart(turn=line.next_turn))
            line = timeline(self.log)
        assert line.turn is not None
        if line.step is not None and not (new and _replied(self.log, line.step.seq)):
            return line.step.turn, line.step.number
        if line.step is not None:
            self.log.append("step/end", StepEnd(turn=line.step.turn, step=line.step.number))
            line = timeline(self.log)
        turn = line.turn.number if line.turn is not None else line.next_turn
        self.log.append("step/start", StepStart(turn=turn, step=line.next_step))
        return turn, line.next_step

    def _close_turn(self) -> None:
        line = timeline(self.log)
        if line.turn is None or line.dangling:
            return
        if line.step is not None:
            self.log.append("step/end", StepEnd(turn=line.step.turn, step=line.step.number))
        self.log.append("turn/end", TurnEnd(turn=line.turn.number, reason="completed"))

    def __repr__(self) -> str:
        return f"EventlogSession({self.session_id!r}, head={self.log.head})"


@dataclass(frozen=True, slots=True)
class _Staged:
    """One group of items, as it will be appended: ``message`` is its core message (``None``
    when it has no core equivalent), ``spelled`` whether an ``openai_agents/items`` event keeps
    the items as given."""

    kind: str
    group: list[dict[str, Any]]
    message: Message | None
    spelled: bool
