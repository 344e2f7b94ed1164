"""``inbox(session)``: queued inputs, the fold of ``agent/inbox/spliced`` (docs/architecture.md).

Two ordered lists: ``next-turn`` (each item opens a turn) and ``next-step`` (delivered at the
next step boundary). Item ids are unique across both. A ``request_id → seq`` index (the first
event that carried the request id: an inbox insert or a ``user/message``) makes a duplicate
submission detectable in O(1). A ``session/forked`` event empties both lists: a fork does not
inherit its parent's pending inbox, nor the request ids of items that were still pending.

The fold is total: it normalizes splice coordinates exactly as the builders in
:mod:`projections.inbox_splices` do, and skips an inserted item whose id is already pending,
so even a log written by a careless producer folds to one deterministic state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from eventlog import Event, InboxItem, InboxSpliced, InboxTarget, Session

from .base import catch_up, events_through, fold

__all__ = (
    "INBOX",
    "Inbox",
    "InboxProjection",
    "InboxState",
    "inbox",
    "normalize_splice",
    "request_id_of",
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
