"""Checking a payload as ``append`` would, without committing it: how a caller that appends
several events for one request (an integration's ``add_items``) makes the request all or
nothing.

``Session.append`` checks each event as it commits it, so a request that appends three events
and whose third payload is refused would leave the first two committed (and written by the
next flush). A caller that checks every payload first with :func:`check_payload` refuses the
whole request before anything is committed. The payload checks are exactly ``append``'s (this
module holds them: ``append`` calls :func:`encode_for_append`); what depends on the log's
state at commit (the turn and step structure, the surface) is the caller's to get right; the
write backlog, :func:`check_room` checks for the whole request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._codec import encode_payload
from ._errors import UnknownEventTypeError, ValidationError
from ._registry import TypeInfo
from ._strict import DEFAULT_MAX_NESTING

if TYPE_CHECKING:
    from ._session import Session

__all__ = ("check_payload", "check_room", "encode_for_append")


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


def check_payload(
    target: Session | Any,
    type: str,
    data: Any,
    *,
    session_id: str | None = None,
    seq: int | None = None,
) -> int:
    """Check ``data`` as :meth:`Session.append` checks the payload of an event of ``type``
    (registered, strictly valid, within ``max_nesting`` and ``max_event_bytes``), committing
    nothing; return the size of its stored bytes. Check every payload of a request first, then
    append them: a refusal then leaves the log exactly as it was.

    :param target: the session the event is for; or, for the first event of a session not
        created yet, the store (its types and limits).
    :param session_id: for a store, the id of the session to be (for the message).
    :param seq: the seq the event will have, for the message (default: the session's next,
        0 for a store).
    :raises UnknownEventTypeError: ``type`` is not registered in the session's types.
    :raises ValidationError: the payload would be refused by ``append``; the message is the
        one ``append`` would give.
    """
    # Imported here: the session module imports this one (append commits through it).
    from ._session import Session
    from ._session_ports import DEFAULT_MAX_EVENT_BYTES

    if isinstance(target, Session):
        session_id, next_seq = target.id, target.head + 1
    else:
        next_seq = 0
    info = target.types.get(type) if isinstance(type, str) else None
    _, _, raw = encode_for_append(
        info,
        type,
        data,
        session_id=session_id or "",
        seq=next_seq if seq is None else seq,
        max_nesting=getattr(target, "max_nesting", DEFAULT_MAX_NESTING),
        max_event_bytes=getattr(target, "max_event_bytes", DEFAULT_MAX_EVENT_BYTES),
    )
    return len(raw)


def check_room(session: Session, sizes: list[int]) -> None:
    """Refuse, before anything is committed, a request whose events (of payloads of ``sizes``
    stored bytes, in the order they will be appended) ``append`` would not all take because the
    store's write backlog would fill on the way. Give upper bounds: a larger size only makes
    the check stricter. Append the events with nothing awaited in between.

    :raises BacklogFullError: one of the events would be refused; nothing was committed.
    :raises ClosedError: the store is closed, or the session is read-only.
    """
    if not sizes:
        return
    # The backlog only grows on the way, so the last event is the one that could be refused,
    # with every other one of the request waiting before it.
    last = session.head + len(sizes)
    session._tail.check_room(last, sizes[-1], waiting=sum(sizes) - sizes[-1])
