"""The OpenAI Agents SDK session's own event types and the fold that rebuilds its item list.

Items with a core equivalent (user and assistant messages, function calls, their outputs) are
core events; four app types, all registered ``ignorable`` so a reader that does not know them
still opens, verifies and lists the session, keep what the core vocabulary cannot say:

- ``openai_agents/items {of, items}``: the exact items the SDK added. With ``of`` set they are
  the SDK's own spelling of the core event at that seq (ids, ``status``, annotations the
  conversion does not reproduce); with ``of`` null they have no core equivalent at all.
- ``openai_agents/pop {item}``: ``pop_item`` removed the latest item (kept here for audit).
- ``openai_agents/clear {}``: ``clear_session``; nothing is deleted.
- ``openai_agents/run-state {turn, step, calls, state}``: what the SDK needs to resume a run
  interrupted for approval (its ``RunState.to_json()``), kept by
  ``EventlogSession.save_interruption`` beside the ``tool/approval-request`` of each call
  ``calls`` names (docs/openai-agents.md, "Tools that need approval").
"""

from __future__ import annotations

from typing import Any

import msgspec

from eventlog import Event, EventTypes
from projections import to_openai_responses

from ._types import register_ignorable

__all__ = (
    "CLEAR",
    "ITEMS",
    "POP",
    "RUN_STATE",
    "Cleared",
    "Items",
    "Popped",
    "SavedRunState",
    "SessionItems",
    "openai_agents_types",
    "register_openai_agents_types",
)

#: Type names: part of the on-disk format.
ITEMS = "openai_agents/items"
POP = "openai_agents/pop"
CLEAR = "openai_agents/clear"
RUN_STATE = "openai_agents/run-state"

_SURFACE_TYPES = frozenset({"user/message", "assistant/message", "tool/result"})


class Items(msgspec.Struct, frozen=True, kw_only=True):
    """``openai_agents/items``: items exactly as the SDK added them.

    :ivar of: the seq of the core event these items spell, or ``None`` when they have no core
        equivalent.
    """

    items: list[dict[str, Any]]
    of: int | None = None


class Popped(msgspec.Struct, frozen=True, kw_only=True):
    """``openai_agents/pop``: the item ``pop_item`` returned."""

    item: dict[str, Any]


class Cleared(msgspec.Struct, frozen=True, kw_only=True):
    """``openai_agents/clear``: every earlier item is gone from ``get_items`` (not from the log)."""


class SavedRunState(msgspec.Struct, frozen=True, kw_only=True):
    """``openai_agents/run-state``: a run of step ``step`` of turn ``turn`` paused for the
    approval of ``calls`` (call ids, in the SDK's order); ``state`` is its
    ``RunState.to_json()``, which ``RunState.from_json`` resumes."""

    turn: int
    step: int
    calls: list[str]
    state: dict[str, Any]


def register_openai_agents_types(types: EventTypes) -> EventTypes:
    """Register the session's four event types (ignorable) in ``types`` and return it.

    Types already registered with the same payload are left as they are.

    :raises ValidationError: one of the names is registered with another payload.
    """
    pairs = ((ITEMS, Items), (POP, Popped), (CLEAR, Cleared), (RUN_STATE, SavedRunState))
    return register_ignorable(types, pairs, "OpenAI Agents session")


def openai_agents_types() -> EventTypes:
    """A registry with the core vocabulary and the session's types: pass it to ``open_store``."""
    return register_openai_agents_types(EventTypes())


class SessionItems:
    """The fold behind ``get_items``: the live item list after each event, kept incrementally.

    A core surface event contributes its Responses-API items (``to_openai_responses``); an
    ``openai_agents/items`` event naming that event (``of``) replaces them with the exact items
    the SDK added; one with no ``of`` appends its items; ``pop`` drops the latest item;
    ``clear`` empties the list. Other events contribute nothing.

    A fold started part-way through a log (to find the latest items without reading all of
    it) is exact about the end of the list: its ``items`` are the true list's last items (a
    pop past them took an item of the unread part; a spelling of a core event of the unread
    part replaced that event's items, the last of that part), and the whole true list once it
    folded a ``clear`` (``cleared``) or started at seq 0.

    :ivar cleared: a ``clear`` was folded.
    """

    __slots__ = ("_last_core", "_next_seq", "cleared", "items")

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self._next_seq = 0
        # (seq, start) of the latest core event's items, which a following spelling replaces.
        self._last_core: tuple[int, int] | None = None
        self.cleared = False

    @property
    def next_seq(self) -> int:
        """The seq of the next event to fold."""
        return self._next_seq

    def catch_up(self, events: Any) -> list[dict[str, Any]]:
        """Fold the events from the last one folded on; return the live list (not a copy)."""
        for event in events[self._next_seq :]:
            self.apply(event)
        return self.items

    def apply(self, event: Event) -> None:
        self._next_seq = event.seq + 1
        data = event.data
        if event.type in _SURFACE_TYPES:
            self._last_core = (event.seq, len(self.items))
            self.items.extend(to_openai_responses([data.message], degrade="text"))
        elif isinstance(data, Items):
            last = self._last_core
            if data.of is not None and last is not None and data.of == last[0]:
                # The exact spelling of the latest core event: it replaces that event's items
                # (nothing model-visible comes between them: the session writes it so).
                del self.items[last[1] :]
            else:
                self._last_core = None
            self.items.extend(data.items)
        elif isinstance(data, Popped):
            if self.items:
                self.items.pop()
            self._last_core = None
        elif isinstance(data, Cleared):
            self.items.clear()
            self._last_core = None
            self.cleared = True
