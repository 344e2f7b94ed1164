"""``EventlogSession``: the OpenAI Agents SDK's ``Session`` protocol on one eventlog session.

Imports no SDK: the protocol is structural, so the session (and a reader of its events) works
whether the extra is installed or not.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from eventlog import (
    APPEND,
    AssistantMessage,
    Message,
    MessageSource,
    Part,
    Session,
    SessionNotFoundError,
    StepEnd,
    StepStart,
    TextPart,
    ToolCallPart,
    ToolResult,
    ToolResultPart,
    TurnEnd,
    TurnStart,
    UserMessage,
    ValidationError,
    new_id,
)
from eventlog.stores import LogStore
from projections import timeline, to_openai_responses
from recovery import repair, scan

from ._openai_agents_events import CLEAR, ITEMS, POP, Cleared, Items, Popped, SessionItems

__all__ = ("EventlogSession",)

_MODEL = MessageSource(kind="model")
_USER = MessageSource(kind="user")
_TOOL = MessageSource(kind="tool")
_ASSISTANT_TYPES = frozenset({"function_call"})
#: Id prefix of a reply the hooks logged before the SDK added it.
_HOOKED = "oa-hooks-"


class EventlogSession:
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

        A run a crash interrupted (the hooks logged a reply or a tool call the SDK never
        added) is repaired first (``recovery.repair``): each tool call the log shows started
        gets a ``function_call_output`` saying its outcome is unknown (``TOOL_OUTCOME_UNKNOWN``),
        each proposed call that never started one saying so (``TOOL_NOT_STARTED``), so the
        model is told rather than left to repeat them.

        :raises SessionBusyError: another live writer holds the session.
        :raises CorruptLogError: the stored log is damaged.
        """
        try:
            log = await store.open(session_id, verify="full")
        except SessionNotFoundError:
            log = await store.create(session_id=session_id, metadata=metadata)
        if _interrupted(log):
            await repair(log)
        return cls(log, session_settings=session_settings)

    @property
    def hooks(self) -> Any:
        """``EventlogHooks`` for this session (imports the SDK)."""
        from ._openai_agents_hooks import EventlogHooks

        return EventlogHooks(self)

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The live items, oldest first; with ``limit`` (else ``session_settings.limit``) the
        latest ``limit`` of them."""
        items = self._fold.catch_up(self.log.events())
        if limit is None and self.session_settings is not None:
            limit = getattr(self.session_settings, "limit", None)
        if limit is None:
            return [dict(item) for item in items]
        return [dict(item) for item in items[max(0, len(items) - limit) :]] if limit > 0 else []

    async def add_items(self, items: list[Any]) -> None:
        """Append ``items`` (Responses-API input items); durable when it returns.

        :raises ValidationError: an item is not a JSON object (nothing is appended).
        """
        checked = [_checked(item) for item in items]
        groups = _groups(checked)
        for kind, group in groups:
            self._log_group(kind, group)
        await self.log.flush()

    async def pop_item(self) -> Any:
        """Remove and return the latest item (``None`` when there is none), by an
        ``openai_agents/pop`` event."""
        items = self._fold.catch_up(self.log.events())
        if not items:
            return None
        item = dict(items[-1])
        self.log.append(POP, Popped(item=item))
        await self.log.flush()
        return item

    async def clear_session(self) -> None:
        """Empty the item list by an ``openai_agents/clear`` event (the log keeps everything)."""
        self._close_turn()
        self.log.append(CLEAR, Cleared())
        self._prelogged.clear()
        await self.log.flush()

    # -- what the hooks call ------------------------------------------------------------

    def log_model_output(self, items: list[dict[str, Any]]) -> int | None:
        """Log a model response's items as an ``assistant/message`` before any tool runs (the
        SDK adds them only after its tools return); the SDK's later ``add_items`` of the same
        items then records only their exact spelling. Returns the message's seq."""
        core = [item for item in items if _kind(item) == "assistant"]
        if not core:
            return None
        seq = self._log_assistant(core, spell=False, id=_HOOKED + new_id())
        self._prelogged.append((seq, core))
        return seq

    def step(self) -> tuple[int, int] | None:
        """The open ``(turn, step)``, or ``None``."""
        line = timeline(self.log)
        return None if line.step is None else (line.step.turn, line.step.number)

    def end_turn(self) -> None:
        """Close the open step and turn (``completed``) when every call in it is answered."""
        self._close_turn()

    # -- mapping ------------------------------------------------------------------------

    def _log_group(self, kind: str, group: list[dict[str, Any]]) -> None:
        if kind == "user":
            # New input after a model reply starts a new turn; input before any reply (several
            # input items of one run) belongs to the turn it opened.
            line = timeline(self.log)
            if line.step is None or _replied(self.log, line.step.seq):
                self._close_turn()
            self._open_step(new=False)
            message = Message(id=new_id(), role="user", content=_user_parts(group[0]), source=_USER)
            self._append_core("user/message", UserMessage(message=message), group)
        elif kind == "assistant":
            if self._prelogged and _same(self._prelogged[0][1], group):
                seq, _ = self._prelogged.pop(0)
                self._spell(seq, group)
            else:
                self._log_assistant(group)
        elif kind == "output":
            turn, step = self._open_step(new=False)
            item = group[0]
            part = ToolResultPart(call_id=item["call_id"], content=item["output"])
            message = Message(id=new_id(), role="tool", content=(part,), source=_TOOL)
            data = ToolResult(turn=turn, step=step, message=message)
            self._append_core("tool/result", data, group)
        else:
            self.log.append(ITEMS, Items(items=group))

    def _log_assistant(
        self, group: list[dict[str, Any]], *, spell: bool = True, id: str | None = None
    ) -> int:
        turn, step = self._open_step(new=True)
        parts: list[Part] = []
        for item in group:
            if item["type"] == "function_call":
                parts.append(
                    ToolCallPart(id=item["call_id"], name=item["name"], arguments=item["arguments"])
                )
            else:
                parts.extend(TextPart(text=c["text"]) for c in item["content"])
        message = Message(id=id or new_id(), role="assistant", content=tuple(parts), source=_MODEL)
        data = AssistantMessage(turn=turn, step=step, message=message)
        return self._append_core("assistant/message", data, group, spell=spell)

    def _append_core(
        self, type_: str, data: Any, group: list[dict[str, Any]], *, spell: bool = True
    ) -> int:
        seq = self.log.append(type_, data, surface=APPEND).seq
        if spell and to_openai_responses([data.message], degrade="text") != group:
            self._spell(seq, group)
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


def _interrupted(log: Session) -> bool:
    """Whether a crash cut a run short: a call of the open step has its ``tool/call`` logged
    (only the hooks write one), or was proposed by a reply the hooks logged and the SDK never
    added (no ``openai_agents/items`` spells it). A call an app added without its output is
    the app's own history, not a crash: it is left as it is."""
    dangling = scan(log).dangling
    if not dangling:
        return False
    events = log.events()
    spelled = {e.data.of for e in events if e.type == ITEMS}
    for call in dangling:
        state = call.call
        if state.call is not None:
            return True
        proposed = state.proposed
        if proposed is not None and proposed not in spelled:
            if events[proposed].data.message.id.startswith(_HOOKED):
                return True
    return False


def _replied(log: Session, start: int) -> bool:
    return any(event.type == "assistant/message" for event in log.events(start))


def _checked(item: Any) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise ValidationError(f"session item {item!r} is not a JSON object")
    return item


def _kind(item: dict[str, Any]) -> str:
    """``user``, ``assistant``, ``output`` (a core equivalent exists) or ``other``."""
    type_ = item.get("type", "message")
    if type_ == "message" and item.get("role") == "user" and _user_texts(item) is not None:
        return "user"
    if type_ == "message" and item.get("role") == "assistant" and _output_texts(item):
        return "assistant"
    if type_ in _ASSISTANT_TYPES and all(
        isinstance(item.get(key), str) for key in ("call_id", "name", "arguments")
    ):
        return "assistant"
    if type_ == "function_call_output" and isinstance(item.get("output"), str):
        return "output" if isinstance(item.get("call_id"), str) else "other"
    return "other"


def _user_texts(item: dict[str, Any]) -> list[str] | None:
    content = item.get("content")
    if isinstance(content, str):
        return [content]
    if (
        isinstance(content, list)
        and content
        and all(
            isinstance(c, dict) and c.get("type") == "input_text" and isinstance(c.get("text"), str)
            for c in content
        )
    ):
        return [c["text"] for c in content]
    return None


def _output_texts(item: dict[str, Any]) -> bool:
    content = item.get("content")
    return isinstance(content, list) and all(
        isinstance(c, dict) and c.get("type") == "output_text" and isinstance(c.get("text"), str)
        for c in content
    )


def _user_parts(item: dict[str, Any]) -> tuple[Part, ...]:
    return tuple(TextPart(text=text) for text in _user_texts(item) or ())


def _groups(items: Iterable[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Consecutive assistant items (one model reply) form one group; every other item is a
    group of its own."""
    groups: list[tuple[str, list[dict[str, Any]]]] = []
    for item in items:
        kind = _kind(item)
        if kind == "assistant" and groups and groups[-1][0] == "assistant":
            groups[-1][1].append(item)
        else:
            groups.append((kind, [item]))
    return groups


def _same(logged: list[dict[str, Any]], added: list[dict[str, Any]]) -> bool:
    """Whether the SDK's items are the reply the hooks logged (by call ids and texts: the SDK
    may spell ids and status fields differently between the two)."""
    return [_signature(item) for item in logged] == [_signature(item) for item in added]


def _signature(item: dict[str, Any]) -> tuple[Any, ...]:
    if item.get("type") == "function_call":
        return ("function_call", item.get("call_id"), item.get("name"), item.get("arguments"))
    return ("message", tuple(c.get("text") for c in item.get("content", ())))
