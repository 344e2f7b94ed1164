"""The arguments of a store's methods, checked, and the decoding of rows it hands out."""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import msgspec

from .._codec import Row, decode_event
from .._errors import ValidationError
from .._event import Event
from .._registry import EventTypes
from .._strict import find_invalid, on_fresh_stack

__all__ = ("checked_metadata", "decoded", "wait_seconds")


def wait_seconds(wait: object, sid: str) -> float:
    """``open``'s ``wait``, checked.

    :raises ValidationError: not a finite number of seconds >= 0.
    """
    try:
        if isinstance(wait, int | float) and not isinstance(wait, bool):
            seconds = float(wait)
            if 0 <= seconds < math.inf:
                return seconds
    except OverflowError:
        pass
    raise ValidationError(f"wait must be a number of seconds >= 0, got {wait!r}", session_id=sid)


def decoded(row: Row, types: EventTypes, sid: str) -> Event:
    """The event stored as ``row`` (see :func:`decode_event`), on a deep stack too."""
    try:
        return decode_event(row, types, session_id=sid)
    except RecursionError:  # a deep caller stack, not a deep payload: redo with a fresh one
        return on_fresh_stack(partial(decode_event, session_id=sid), row, types)


def checked_metadata(metadata: dict[str, Any] | None, max_nesting: int) -> dict[str, Any]:
    """A JSON copy of ``metadata``, held to the rules of payloads (see :mod:`eventlog._strict`).

    :raises ValidationError: not a dict of JSON values, naming the path of the first bad one.
    """
    if metadata is None:
        return {}
    if type(metadata) is not dict:
        raise ValidationError(f"metadata must be a dict, got {type(metadata).__name__}")
    why = find_invalid(metadata, max_nesting=max_nesting)
    if why is not None:
        raise ValidationError(f"metadata is not valid: {why}")
    try:
        return dict(msgspec.json.decode(msgspec.json.encode(metadata)))
    except RecursionError:
        return dict(on_fresh_stack(lambda: msgspec.json.decode(msgspec.json.encode(metadata))))
    except (TypeError, ValueError, msgspec.MsgspecError) as exc:
        raise ValidationError(f"metadata is not JSON-serialisable: {exc}") from exc
