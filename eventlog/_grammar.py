"""The structural rules of the core vocabulary, checked at commit: turns, steps and roles.

A log written through ``append`` is well-formed:

- ``turn/start`` opens turn ``n`` only when no turn is open and ``n`` is the next turn number
  (turns count from 1, one after another);
- ``turn/end`` closes the open turn, naming its number, once its step (if any) has ended;
- ``step/start`` opens the next step of the open turn (steps count from 1 in each turn), only
  when no step is open; ``step/end`` closes exactly the open step;
- messages carry their role: ``user/message`` a ``user`` message, ``assistant/message`` an
  ``assistant`` one, ``tool/result`` and ``tool/outcome`` a ``tool`` one (and a ``user``
  message as their ``context``, if any).

Other types (inbox splices, compaction, request headers, app types) may come anywhere; so may
messages, whose ``turn`` and ``step`` fields are not held to the open step (pruning and
compaction rewrite results between turns; hand-built logs put messages outside steps). Stored
logs are folded without being judged (a log written before these rules still opens); the next
append is checked against the state they leave.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._vocabulary import CORE_TYPES

__all__ = ("TurnGrammar",)


class TurnGrammar:
    """Where a log stands: the open turn and step, and the numbers that come next.

    :ivar turn: the open turn's number, or ``None``.
    :ivar step: the open step's number (of the open turn), or ``None``.
    :ivar last_turn: the number of the last turn started (0 before the first).
    :ivar last_step: the number of the last step started in the current turn.
    """

    __slots__ = ("last_step", "last_turn", "step", "turn")

    def __init__(self) -> None:
        self.turn: int | None = None
        self.step: int | None = None
        self.last_turn = 0
        self.last_step = 0

    def check(self, type_: str, data: Any) -> str | None:
        """Why ``data`` of ``type_`` may not come next, naming the open turn and step, or
        ``None`` when it may."""
        if type(data) is not CORE_TYPES.get(type_):
            return None  # not a core type (or a registry that redefines it)
        if type_ in _ROLES:
            return _role_only(type_, data)
        rule = _RULES.get(type_)
        return None if rule is None else rule(self, data)

    def advance(self, type_: str, data: Any) -> None:
        """Fold one committed (or stored) event; total, whatever the event."""
        if type_ not in _RULES or type(data) is not CORE_TYPES[type_]:
            return
        event: Any = data  # one of the core payloads (an assignment: cast() is a call)
        if type_ == "turn/start":
            self.turn, self.step = event.turn, None
            self.last_turn, self.last_step = event.turn, 0
        elif type_ == "turn/end":
            self.turn = self.step = None
        elif type_ == "step/start":
            self.step = self.last_step = event.step
        elif type_ == "step/end":
            self.step = None

    def where(self) -> str:
        """The open turn and step, in words."""
        if self.turn is None:
            return "no turn is open"
        if self.step is None:
            return f"turn {self.turn} is open, no step"
        return f"turn {self.turn}, step {self.step} is open"

    def __repr__(self) -> str:
        return f"<TurnGrammar {self.where()}>"


def _turn_start(g: TurnGrammar, data: Any) -> str | None:
    if g.turn is not None:
        return f"turn/start of turn {data.turn}, but {g.where()}"
    if data.turn != g.last_turn + 1:
        return f"turn/start of turn {data.turn}: the next turn is {g.last_turn + 1}"
    return None


def _turn_end(g: TurnGrammar, data: Any) -> str | None:
    if g.turn is None or data.turn != g.turn:
        return f"turn/end of turn {data.turn}, but {g.where()}"
    if g.step is not None:
        return f"turn/end of turn {data.turn} before its step ends: {g.where()}"
    return None


def _step_start(g: TurnGrammar, data: Any) -> str | None:
    if g.turn is None or data.turn != g.turn or g.step is not None:
        return f"step/start of turn {data.turn}, step {data.step}, but {g.where()}"
    if data.step != g.last_step + 1:
        return (
            f"step/start of turn {data.turn}, step {data.step}: the next step of turn "
            f"{g.turn} is {g.last_step + 1}"
        )
    return None


def _step_end(g: TurnGrammar, data: Any) -> str | None:
    if g.step is None or (data.turn, data.step) != (g.turn, g.step):
        return f"step/end of turn {data.turn}, step {data.step}, but {g.where()}"
    return None


_ROLES = {
    "user/message": ("user", "message"),
    "assistant/message": ("assistant", "message"),
    "tool/outcome": ("tool", "result"),
    "tool/result": ("tool", "message"),
}


def _role_only(type_: str, data: Any) -> str | None:
    if type_ not in _ROLES:
        return None
    role, field = _ROLES[type_]
    found = getattr(data, field).role
    if found != role:
        return f"{type_} carries a {found!r} message; it must be {role!r}"
    # What a tool adds to the next request is read by the model as the user's turn.
    context = getattr(data, "context", None)
    if context is not None and context.role != "user":
        return f"{type_} carries a {context.role!r} context; it must be 'user'"
    return None


Rule = Callable[[TurnGrammar, Any], "str | None"]

_RULES: dict[str, Rule] = {
    "turn/start": _turn_start,
    "turn/end": _turn_end,
    "step/start": _step_start,
    "step/end": _step_end,
}
