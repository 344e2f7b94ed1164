"""The payload checks ``append`` makes before it commits an event: registered type, strictly
valid payload, within the size limit. :meth:`Session.append` commits through
:func:`encode_for_append`, and so does :func:`eventlog.check_payload` (``eventlog._precheck``),
which is how the two give the same answer and the same message.
"""

from __future__ import annotations

from typing import Any

from ._codec import encode_payload
from ._errors import UnknownEventTypeError, ValidationError
from ._registry import TypeInfo

__all__ = ("encode_for_append",)


def encode_for_append(
    info: TypeInfo | None,
    type_: object,
    data: Any,
    *,
    session_id: str,
    seq: int,
    max_nesting: int,
    max_event_bytes: int,
) -> tuple[TypeInfo, Any, bytes]:
    """The type ``append`` commits ``data`` as (``info``, ``None`` when ``type_`` is not
    registered), the payload it commits at ``seq``, and the payload's stored bytes.

    :raises UnknownEventTypeError: ``type_`` is not registered.
    :raises ValidationError: the payload is invalid (see ``encode_payload``) or its bytes are
        over ``max_event_bytes``.
    """
    if info is None:
        raise UnknownEventTypeError(
            f"session {session_id!r}, seq {seq}: event type {type_!r} is not registered",
            session_id=session_id,
            seq=seq,
            hint="register app types with EventTypes.register",
        )
    payload, raw = encode_payload(
        info, data, session_id=session_id, seq=seq, max_nesting=max_nesting
    )
    if len(raw) > max_event_bytes:
        raise ValidationError(
            f"session {session_id!r}, seq {seq}: payload of {type_!r} is {len(raw)} bytes, "
            f"over the limit of {max_event_bytes}",
            session_id=session_id,
            seq=seq,
        )
    return info, payload, raw
