"""The inbox: queued inputs, the fold of ``agent/inbox/spliced``, and the builders of its
splices (docs/architecture.md). One module, so the splice rules the fold applies and the rules
the builders check are read side by side.

Two ordered lists: ``next-turn`` (each item opens a turn) and ``next-step`` (delivered at the
next step boundary). Item ids are unique across both. A ``request_id → seq`` index (the first
event that carried the request id: an inbox insert or a ``user/message``) makes a duplicate
submission detectable in O(1). A ``session/forked`` event empties both lists: a fork does not
inherit its parent's pending inbox, nor the request ids of items that were still pending.

The splice rules: coordinates follow JavaScript ``splice`` (:func:`normalize_splice`), and an
inserted id must not be pending once the removed span is gone, nor repeated. The builders
(:func:`splice`, :func:`enqueue`, :func:`claim`, :func:`cancel`, :func:`cancel_all`) refuse a
splice that breaks them; they take the current :class:`Inbox` snapshot, change nothing, and
return the payload(s) to append, in order (each valid after the ones before it)::

    for payload in claim(inbox(session), "next-turn").splices:
        session.append("agent/inbox/spliced", payload)

The fold is total: it normalizes coordinates the same way and skips an inserted item whose id
is already pending, so even a log written by a careless producer folds to one deterministic
state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from eventlog import Event, InboxItem, InboxSpliced, InboxTarget, Message, Session, ValidationError

from .base import catch_up, events_through, fold

__all__ = (
    "INBOX",
    "Claim",
    "Inbox",
    "InboxProjection",
    "InboxState",
    "Outcome",
    "cancel",
    "cancel_all",
    "claim",
    "enqueue",
    "inbox",
    "normalize_splice",
    "request_id_of",
    "splice",
)


def normalize_splice(length: int, start: int, removed: int) -> tuple[int, int]:
    """Clamp splice coordinates against a list of ``length`` items (JavaScript ``splice`` rules).

    A negative ``start`` counts from the end; ``start`` is clamped to ``0..length`` and
    ``removed`` to ``0..length - start``.
    """
    if start < 0:
        start = max(length + start, 0)
    start = min(start, length)
    return start, min(max(removed, 0), length - start)


def request_id_of(item: InboxItem) -> str | None:
    """The request id an item was submitted under (the item's, else its message source's)."""
    if item.request_id is not None:
        return item.request_id
    source = item.message.source
    return source.request_id if source is not None else None


class InboxState:
    """The fold's mutable state; readers get :class:`Inbox` snapshots of it."""

    __slots__ = ("ids", "lists", "requests", "seq", "snapshot")

    def __init__(self) -> None:
        self.lists: dict[InboxTarget, list[InboxItem]] = {"next-turn": [], "next-step": []}
        self.ids: set[str] = set()
        # Append-only between forks, with ascending seqs: snapshots share it (see Inbox).
        self.requests: dict[str, int] = {}
        self.seq = -1  # the last event that changed this state
        self.snapshot: Inbox | None = None

    def view(self) -> Inbox:
        """The immutable snapshot of this state (made once per change)."""
        snapshot = self.snapshot
        if snapshot is None:
            snapshot = self.snapshot = Inbox(self)
        return snapshot


class Inbox:
    """An immutable snapshot of a session's inbox.

    :ivar next_turn: items that each open a turn, in order.
    :ivar next_step: items delivered at the next step boundary, in order.
    :ivar seq: the last event that changed the inbox (-1 before any).
    """

    __slots__ = ("_ids", "_requests", "next_step", "next_turn", "seq")

    def __init__(self, state: InboxState) -> None:
        self.next_turn: tuple[InboxItem, ...] = tuple(state.lists["next-turn"])
        self.next_step: tuple[InboxItem, ...] = tuple(state.lists["next-step"])
        self._ids = frozenset(state.ids)
        self._requests = state.requests
        self.seq = state.seq

    def items(self, target: InboxTarget) -> tuple[InboxItem, ...]:
        """The pending items of one list."""
        return self.next_turn if target == "next-turn" else self.next_step

    def __len__(self) -> int:
        return len(self.next_turn) + len(self.next_step)

    def __iter__(self) -> Iterator[InboxItem]:
        """Every pending item: next-step first, then next-turn (the order of a claim)."""
        yield from self.next_step
        yield from self.next_turn

    def __contains__(self, item_id: object) -> bool:
        """Whether an item with this id is pending (O(1))."""
        return item_id in self._ids

    @property
    def wakes(self) -> bool:
        """Whether a pending item asks to start work (``wake``)."""
        return any(item.wake for item in self)

    def request_seq(self, request_id: str) -> int | None:
        """The seq of the first event that carried ``request_id``, or ``None`` (O(1)).

        A submission whose request id is known here is a duplicate.
        """
        seq = self._requests.get(request_id)
        return seq if seq is not None and seq <= self.seq else None

    def requests(self) -> dict[str, int]:
        """Every known request id and its seq (a copy, O(n); for inspection and tests)."""
        return {rid: seq for rid, seq in self._requests.items() if seq <= self.seq}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Inbox):
            return NotImplemented
        return (
            self.next_turn == other.next_turn
            and self.next_step == other.next_step
            and self.requests() == other.requests()
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"<Inbox next-turn={[i.id for i in self.next_turn]} "
            f"next-step={[i.id for i in self.next_step]} seq={self.seq}>"
        )


def _spliced(state: InboxState, event: Event) -> None:
    data: InboxSpliced = event.data
    items = state.lists[data.target]
    start, removed = normalize_splice(len(items), data.start, data.removed)
    for item in items[start : start + removed]:
        state.ids.discard(item.id)
    inserted: list[InboxItem] = []
    for item in data.inserted:
        if item.id in state.ids:
            continue  # ids are unique across both lists; see the module docstring
        state.ids.add(item.id)
        inserted.append(item)
        request_id = request_id_of(item)
        if request_id is not None:
            state.requests.setdefault(request_id, event.seq)
    items[start : start + removed] = inserted


def _user_message(state: InboxState, event: Event) -> None:
    source = event.data.message.source
    if source is not None and source.request_id is not None:
        state.requests.setdefault(source.request_id, event.seq)


def _forked(state: InboxState, event: Event) -> None:
    pending = {request_id_of(item) for target in state.lists.values() for item in target}
    # A new dict, not an edit: snapshots taken before the fork keep the old one.
    state.requests = {rid: seq for rid, seq in state.requests.items() if rid not in pending}
    state.lists = {"next-turn": [], "next-step": []}
    state.ids = set()


_HANDLERS: dict[str, Callable[[InboxState, Event], None]] = {
    "agent/inbox/spliced": _spliced,
    "user/message": _user_message,
    "session/forked": _forked,
}


class InboxProjection:
    """The inbox fold (see :mod:`projections.base`)."""

    key = "projections.inbox"

    def initial(self) -> InboxState:
        return InboxState()

    def apply(self, state: InboxState, event: Event) -> InboxState:
        handler = _HANDLERS.get(event.type)
        if handler is not None:
            handler(state, event)
            state.seq = event.seq
            state.snapshot = None
        return state


#: The one inbox projection instance.
INBOX = InboxProjection()


def inbox(session: Session, *, at: int | None = None) -> Inbox:
    """The inbox of ``session`` now (O(new events)), or as it stood after event ``at``.

    :raises ValidationError: ``at`` is not between -1 and the session's head.
    """
    if at is not None:
        return fold(INBOX, events_through(session, at)).view()
    return catch_up(session, INBOX).view()


# -- the builders of splices -------------------------------------------------------------------

_TARGETS: tuple[InboxTarget, ...] = ("next-turn", "next-step")
#: Why a splice removes items: taken by a step, withdrawn, or refused (the agent's
#: ``before_step`` hook blocked the step that would have taken them).
Outcome = Literal["claimed", "canceled", "refused"]


@dataclass(frozen=True, slots=True)
class Claim:
    """What a step takes from the inbox: the splices to append and the items they remove."""

    splices: tuple[InboxSpliced, ...]
    items: tuple[InboxItem, ...]


def splice(
    inbox: Inbox,
    target: InboxTarget,
    start: int = 0,
    removed: int = 0,
    inserted: Sequence[InboxItem] = (),
    *,
    outcome: Outcome | None = None,
) -> InboxSpliced | None:
    """A splice of one list, normalized (see :func:`normalize_splice`).

    Returns ``None`` for a splice that would change nothing (nothing is written for it).

    :param outcome: why items are removed; required when the splice removes any.
    :raises ValidationError: unknown target, an inserted id that is repeated or already pending
        (other than in the removed span), an ``outcome`` missing for a removal or given for an
        insert-only splice.
    """
    _check_target(target)
    items = inbox.items(target)
    start, removed = normalize_splice(len(items), start, removed)
    if removed == 0 and not inserted:
        return None
    freed = {item.id for item in items[start : start + removed]}
    seen: set[str] = set()
    for item in inserted:
        if item.id in seen or (item.id in inbox and item.id not in freed):
            raise ValidationError(f"inbox item id {item.id!r} is already pending")
        seen.add(item.id)
    if removed and outcome is None:
        raise ValidationError("an inbox splice that removes items needs an outcome")
    if not removed and outcome is not None:
        raise ValidationError(f"outcome {outcome!r} given for a splice that removes nothing")
    return InboxSpliced(
        target=target, start=start, removed=removed, inserted=tuple(inserted), outcome=outcome
    )


def enqueue(
    inbox: Inbox,
    target: InboxTarget,
    message: Message,
    *,
    request_id: str | None = None,
    wake: bool = True,
    front: bool = False,
) -> InboxSpliced:
    """Queue ``message`` at the end of ``target`` (at the front with ``front=True``).

    The item's id is the message id; ``request_id`` defaults to the message source's.

    :raises ValidationError: the id is already pending, or the request id was already submitted
        (check :meth:`Inbox.request_seq` first to answer a retry).
    """
    item = InboxItem(id=message.id, message=message, request_id=request_id, wake=wake)
    rid = request_id_of(item)
    if rid is not None:
        seq = inbox.request_seq(rid)
        if seq is not None:
            raise ValidationError(f"request id {rid!r} was already submitted at seq {seq}")
    start = 0 if front else len(inbox.items(target))
    payload = splice(inbox, target, start, 0, (item,))
    assert payload is not None  # it inserts one item
    return payload


def claim(inbox: Inbox, target: InboxTarget) -> Claim:
    """Take what a step starts with: all of next-step, plus the first next-turn item when
    ``target`` is ``next-turn`` (a new turn). Items come in that order.

    :raises ValidationError: unknown target.
    """
    _check_target(target)
    splices: list[InboxSpliced] = []
    items: list[InboxItem] = []
    if inbox.next_step:
        splices.append(_removal("next-step", 0, len(inbox.next_step), "claimed"))
        items.extend(inbox.next_step)
    if target == "next-turn" and inbox.next_turn:
        splices.append(_removal("next-turn", 0, 1, "claimed"))
        items.append(inbox.next_turn[0])
    return Claim(tuple(splices), tuple(items))


def cancel(inbox: Inbox, item_id: str) -> InboxSpliced:
    """Withdraw one pending item (``outcome: canceled``).

    :raises ValidationError: no item with that id is pending.
    """
    for target in _TARGETS:
        for position, item in enumerate(inbox.items(target)):
            if item.id == item_id:
                return _removal(target, position, 1, "canceled")
    raise ValidationError(f"inbox item id {item_id!r} is not pending")


def cancel_all(inbox: Inbox) -> tuple[InboxSpliced, ...]:
    """Withdraw everything pending: next-step first, then next-turn (``outcome: canceled``)."""
    lists: tuple[tuple[InboxTarget, tuple[InboxItem, ...]], ...] = (
        ("next-step", inbox.next_step),
        ("next-turn", inbox.next_turn),
    )
    return tuple(_removal(target, 0, len(items), "canceled") for target, items in lists if items)


def _check_target(target: InboxTarget) -> None:
    if target not in _TARGETS:
        raise ValidationError(f"inbox target {target!r} is not 'next-turn' or 'next-step'")


def _removal(target: InboxTarget, start: int, removed: int, outcome: Outcome) -> InboxSpliced:
    return InboxSpliced(target=target, start=start, removed=removed, outcome=outcome)
