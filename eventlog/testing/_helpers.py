"""What the conformance cases are made of: the events they write and compare, and two helpers
a store's own tests use, :func:`flip_a_letter` (for the ``tamper_event`` side door) and
:func:`lease_refusals` (to tell that an ``open(wait=...)`` really waited).
"""

from __future__ import annotations

import anyio
import msgspec

from .._event import APPEND, Event
from .._message import Message
from .._session import Session
from .._vocabulary import StepEnd, StepStart, TurnEnd, TurnStart, UserMessage
from ..stores import LogStore

__all__ = (
    "Note",
    "append_turn",
    "append_user",
    "assert_same",
    "flip_a_letter",
    "lease_refusals",
    "plant_unstorable_time",
    "user_texts",
)


class Note(msgspec.Struct, frozen=True, kw_only=True):
    """An app's own payload, registered by the cases that need a type the core does not know."""

    text: str


def append_user(session: Session, text: str) -> Event:
    """Commit a ``user/message`` saying ``text``, appended to the surface."""
    return session.append("user/message", UserMessage(message=Message.user(text)), surface=APPEND)


def append_turn(session: Session, turn: int, text: str = "hello") -> None:
    """Commit a whole turn ``turn`` (five events) whose user message says ``text``."""
    session.append("turn/start", TurnStart(turn=turn))
    append_user(session, text)
    session.append("step/start", StepStart(turn=turn, step=1))
    session.append("step/end", StepEnd(turn=turn, step=1))
    session.append("turn/end", TurnEnd(turn=turn, reason="completed"))


def plant_unstorable_time(session: Session) -> None:
    """Commit a valid event, then swap its queued copy for one whose ``time`` no store column
    holds (2**63): a row that got past the commit-time checks (a side door into the writer)."""
    event = session.append("turn/start", TurnStart(turn=1))
    queued = session._tail.queued  # type: ignore[attr-defined]
    assert queued[-1][0] is event
    queued[-1] = (msgspec.structs.replace(event, time=2**63), queued[-1][1])


async def user_texts(store: LogStore, session_id: str) -> list[str]:
    """The user texts stored in a session, read without the lease."""
    return [e.data.message.text async for e in store.read(session_id) if e.type == "user/message"]


def assert_same(a: list[Event], b: list[Event]) -> None:
    """Assert the two lists hold the same events, field by field."""
    assert [msgspec.to_builtins(e) for e in a] == [msgspec.to_builtins(e) for e in b]


def lease_refusals(store: LogStore) -> anyio.Event:
    """An event set the first time ``store`` is refused a writer lease (``SessionBusyError``:
    a live writer holds it), so a test can tell that a waiting ``open(wait=...)`` really
    waited before it lets the holder go (:meth:`LogStore.watch_lease_refusals`)."""
    return store.watch_lease_refusals()


def flip_a_letter(data: bytes) -> bytes:
    """``data`` (a stored event's JSON) with the case of the first letter of its first
    ``"text"`` value flipped: still valid JSON that decodes to the same payload, a different
    text, so only the hash chain can tell. (A flipped quote or brace fails as invalid JSON
    instead, and a test would pass even with the chain unchecked.)

    :raises ValueError: ``data`` has no ``"text"`` value starting with a letter.
    """
    at = data.find(b'"text":"') + len(b'"text":"')
    if at < len(b'"text":"') or not data[at : at + 1].isalpha():
        raise ValueError("no text value starting with a letter to flip")
    flipped = data[:at] + bytes([data[at] ^ 0x20]) + data[at + 1 :]
    msgspec.json.decode(flipped)  # still valid JSON
    return flipped
