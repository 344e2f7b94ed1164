"""Argument checks for the agent layer's constructors: wrong types and values are refused at
once, with an :class:`~agent.AgentConfigError` naming the argument, what it must be and what was
given, instead of an ``AttributeError`` (or a wrong request) in the middle of a later turn.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from eventlog import DEFAULT_MAX_NESTING, find_invalid

from ._errors import AgentConfigError

__all__ = (
    "check_callable",
    "check_choice",
    "check_count",
    "check_optional_str",
    "check_params",
    "check_seconds",
    "check_str",
    "check_tool_name",
    "clipped",
    "described",
    "refuse",
)

#: What both providers accept as a tool (function) name; anything else is refused by the server
#: with a 400 on the first request, so it is refused here when the tool is built.
_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


#: The longest free text the agent records from code it does not own (a hook's error or a
#: block's reason, an approval policy's reason): text of any size must not make the record
#: itself too large for the log.
RECORDED_TEXT = 4000


def clipped(text: str | None) -> str | None:
    """``text`` cut to :data:`RECORDED_TEXT` characters (the last one an ellipsis)."""
    if text is None or len(text) <= RECORDED_TEXT:
        return text
    return text[: RECORDED_TEXT - 1] + "…"


def described(value: object) -> str:
    """``value`` for an error message: its type and a short repr."""
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def refuse(where: str, name: str, expected: str, value: object) -> AgentConfigError:
    """The error for argument ``name`` of ``where``: it must be ``expected``, got ``value``."""
    return AgentConfigError(f"{where}: {name} must be {expected}, got {described(value)}")


def check_str(where: str, name: str, value: object) -> str:
    if not isinstance(value, str):
        raise refuse(where, name, "a string", value)
    return value


def check_optional_str(where: str, name: str, value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise refuse(where, name, "a string or None", value)
    return value


def check_count(where: str, name: str, value: object, minimum: int) -> int:
    """An ``int`` (not a ``bool``) of at least ``minimum``."""
    if type(value) is not int or value < minimum:
        raise refuse(where, name, f"an integer >= {minimum}", value)
    return value


def check_seconds(where: str, name: str, value: object, *, positive: bool = False) -> float:
    """A finite real number of seconds, ``>= 0`` (``> 0`` when ``positive``)."""
    seconds = -1.0
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value) if abs(value) < 1e300 else math.inf  # a huge int: no OverflowError
    if not math.isfinite(seconds) or seconds < 0 or (positive and seconds == 0):
        bound = "> 0" if positive else ">= 0"
        raise refuse(where, name, f"a finite number of seconds {bound}", value)
    return seconds


def check_callable(where: str, name: str, value: object, expected: str) -> Callable[..., Any]:
    if not callable(value):
        raise refuse(where, name, expected, value)
    return value


def check_choice(where: str, name: str, value: object, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise refuse(where, name, "one of " + ", ".join(repr(c) for c in choices), value)
    return value


def check_params(where: str, value: object) -> dict[str, Any]:
    """Model parameters: a mapping of string keys to JSON values (they are recorded in
    ``request/header``, so a value JSON cannot hold would fail the first step)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise refuse(where, "params", "a mapping of names to JSON values, or None", value)
    params = dict(value)
    for key in params:
        if not isinstance(key, str):
            raise refuse(where, "params", "keyed by strings", key)
    # The commit-time check of every payload, run now rather than at the first step.
    why = find_invalid(params, max_nesting=DEFAULT_MAX_NESTING)
    if why is not None:
        raise AgentConfigError(
            f"{where}: params cannot be recorded: {why.replace('$', 'params', 1)}"
        )
    return params


def check_tool_name(where: str, value: object) -> str:
    """A tool name both providers accept: 1 to 64 letters, digits, ``_`` or ``-``."""
    if not isinstance(value, str) or _TOOL_NAME.fullmatch(value) is None:
        raise refuse(where, "the tool name", "1 to 64 letters, digits, '_' or '-'", value)
    return value
