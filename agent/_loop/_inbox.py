"""Admitting input: durable inbox splices for followup, steer, inject and prompt.

Every input goes through an ``agent/inbox/spliced`` event before any turn sees it, so a pending
input survives a restart, and a request id is admitted once: the inbox projection indexes every
request id ever submitted (pending, claimed, or already a ``user/message``), so a client retry
after a crash or a timeout is answered "accepted" without being queued twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from eventlog import InboxTarget, Message, Session
from projections import inbox
from projections.inbox import enqueue

__all__ = ("Admission", "as_message", "prompt", "submit")


@dataclass(frozen=True, slots=True)
class Admission:
    """The answer to a submission.

    :ivar enqueued: false for a duplicate request id (it was admitted before).
    :ivar seq: the event that admitted the request (the earlier one for a duplicate).
    :ivar message_id: the queued message's id (``None`` for a duplicate).
    """

    enqueued: bool
    seq: int
    message_id: str | None = None

    @property
    def accepted(self) -> bool:
        """Always true: a duplicate is accepted, it is just not queued again."""
        return True


def as_message(message: str | Message, *, request_id: str | None = None) -> Message:
    """A user message for ``message`` (text becomes a fresh user message)."""
    if isinstance(message, Message):
        return message
    return Message.user(message, request_id=request_id)


def submit(
    session: Session,
    target: InboxTarget,
    message: str | Message,
    *,
    wake: bool = True,
    request_id: str | None = None,
) -> Admission:
    """Commit one input to the inbox (no flush); a known ``request_id`` is not queued again.

    :raises ValidationError: the message id is already pending.
    """
    box = inbox(session)
    if request_id is not None:
        seq = box.request_seq(request_id)
        if seq is not None:
            return Admission(enqueued=False, seq=seq)
    msg = as_message(message, request_id=request_id)
    payload = enqueue(box, target, msg, request_id=request_id, wake=wake)
    event = session.append("agent/inbox/spliced", payload)
    return Admission(enqueued=True, seq=event.seq, message_id=msg.id)


async def prompt(session: Session, text: str | Message, *, request_id: str) -> Admission:
    """Queue a user prompt for the next turn, once per ``request_id``; durable on return.

    Usable without a running agent (e.g. from a web handler); an agent picks it up from the
    inbox. A duplicate (also after a restart) returns ``enqueued=False`` and writes nothing.

    :raises StoreWriteError: the prompt was committed but could not be made durable.
    """
    admission = submit(session, "next-turn", text, request_id=request_id)
    await session.flush()
    return admission
