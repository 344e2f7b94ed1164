"""Registering an integration's event types: the one rule every integration follows."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from eventlog import EventTypes, ValidationError

__all__ = ("register_ignorable", "shown")

#: What a refusal shows of a given value at most (a huge string is not copied into a message).
_SHOWN = 60


def register_ignorable(
    types: EventTypes, payloads: Iterable[tuple[str, type[Any]]], owner: str
) -> EventTypes:
    """Register each ``(name, payload)`` as ignorable in ``types`` and return it; names already
    registered with the same payload are left as they are.

    :raises ValidationError: a name is registered with another payload (``owner`` names the
        integration whose payload it should be).
    """
    for name, payload in payloads:
        info = types.get(name)
        if info is None:
            types.register(name, payload, ignorable=True)
        elif info.payload is not payload:
            raise ValidationError(
                f"event type {name!r} is registered with {info.payload.__name__}, "
                f"not the {owner}'s {payload.__name__}"
            )
    return types


def shown(value: object) -> str:
    """``value`` as a refusal message shows it: its repr cut to a readable length, or its type
    when even ``repr`` fails (a structure nested too deep)."""
    try:
        text = repr(value)
    except Exception:
        return f"a `{type(value).__name__}`"
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."
