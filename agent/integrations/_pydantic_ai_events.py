"""The pydantic-ai history's own event type: each ``ModelMessage`` exactly as pydantic-ai
dumps it.

The messages a run adds are core events (``user/message``, ``assistant/message``,
``tool/result``, inside ``turn/*`` and ``step/*`` boundaries), so ``eventlog audit``, the web
app and recovery read them; what the core vocabulary cannot say exactly (timestamps, run ids,
provider details, thinking signatures, instructions) is kept in one ignorable app type, from
which the history is rebuilt:

- ``pydantic_ai/message {message}``: one ``ModelMessage`` as ``ModelMessagesTypeAdapter``
  dumps it (JSON mode), its ``sources`` the core events that say it.

This module imports no pydantic-ai: a reader such as the ``eventlog`` command registers the type
whether the extra is installed or not.
"""

from __future__ import annotations

from typing import Any

import msgspec

from eventlog import EventTypes

from ._types import register_ignorable

__all__ = ("MESSAGE", "Spelled", "pydantic_ai_types", "register_pydantic_ai_types")

#: The type name: part of the on-disk format.
MESSAGE = "pydantic_ai/message"


class Spelled(msgspec.Struct, frozen=True, kw_only=True):
    """``pydantic_ai/message``: one ``ModelMessage`` in pydantic-ai's own JSON form."""

    message: dict[str, Any]


def register_pydantic_ai_types(types: EventTypes) -> EventTypes:
    """Register the history's event type (ignorable) in ``types`` and return it.

    A type already registered with the same payload is left as it is.

    :raises ValidationError: the name is registered with another payload.
    """
    return register_ignorable(types, ((MESSAGE, Spelled),), "pydantic-ai history")


def pydantic_ai_types() -> EventTypes:
    """A registry with the core vocabulary and the history's type: pass it to ``open_store``."""
    return register_pydantic_ai_types(EventTypes())
