"""Pure builders of ``agent/inbox/spliced`` payloads: enqueue, claim, cancel (docs/architecture.md).

Each takes the current :class:`~projections.inbox.Inbox` snapshot and returns the payload(s) to
append, with normalized coordinates, validated against that snapshot. They change nothing: the
caller appends the payloads, in order, and the inbox projection folds them::

    for payload in claim(inbox(session), "next-turn").splices:
        session.append("agent/inbox/spliced", payload)

Coordinates of a returned tuple of splices are each valid after the ones before them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from eventlog import InboxItem, InboxSpliced, InboxTarget, Message, ValidationError

from ._inbox import Inbox, normalize_splice, request_id_of

__all__ = ("Claim", "cancel", "cancel_all", "claim", "enqueue", "splice", "Outcome")

_TARGETS: tuple[InboxTarget, ...] = ("next-turn", "next-step")
Outcome = Literal["claimed", "canceled"]


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
    """A splice of one list, normalized (see :func:`~projections.inbox.normalize_splice`).

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
        (check :meth:`~projections.inbox.Inbox.request_seq` first to answer a retry).
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
