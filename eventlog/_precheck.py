"""Checking a payload as ``append`` would, without committing it: how a caller that appends
several events for one request (an integration's ``add_items``) makes the request all or
nothing.

``Session.append`` checks each event as it commits it, so a request that appends three events
and whose third payload is refused would leave the first two committed (and written by the
next flush). A caller that checks every payload first with :func:`check_payload` refuses the
whole request before anything is committed. The payload checks are exactly ``append``'s (both
go through ``eventlog._staging.encode_for_append``); what depends on the log's state at commit
(the turn and step structure, the surface) is the caller's to get right; the write backlog,
:func:`check_room` checks for the whole request.
"""

from __future__ import annotations

from typing import Any

from ._session import Session
from ._session_ports import DEFAULT_MAX_EVENT_BYTES
from ._staging import encode_for_append
from ._strict import DEFAULT_MAX_NESTING

__all__ = ("check_payload", "check_room")


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
