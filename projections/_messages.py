"""``messages(session)``: the model-visible history, derived from the surface.

See docs/architecture.md.

Each surface node derives to its event's message, except an ``assistant/message`` with empty
content, which derives to nothing (a step that only hosts usage). A ``tool/result`` carrying a
``context`` (what the tool adds to the next request) contributes it after the run of results it
belongs to: a provider wants a step's results right after the call that asked for them, so the
contexts follow the step's last result, in the order of the results (the model's order of the
calls), and come before whatever the next node derives to. A view taken while the run is still
open ends with the contexts so far. The live derivation keeps a
cached list on the session: pure appends extend it, a replace (noticed through the surface
index's ``generation``) starts a new one. Its cursor is (generation, surface nodes consumed)
rather than a next seq, because the surface index is already folded at commit by the log.

``messages(session, at=seq)`` folds the log prefix from scratch: what the model saw then.
"""

from __future__ import annotations

from collections.abc import Iterable

from eventlog import Event, Message, PrefixView, Session, fold_surface

from .base import events_through, read_through

__all__ = ("MessagesView", "derive", "messages", "messages_at")

_KEY = "projections.messages"


class MessagesView(PrefixView[Message]):
    """An immutable sequence of messages (see :class:`~eventlog.PrefixView`)."""

    __slots__ = ()
    _index_name = "message index"

    def __repr__(self) -> str:
        return f"<MessagesView {len(self)} messages>"


def derive(event: Event) -> Message | None:
    """The message a surface event contributes, or ``None`` (an empty assistant message)."""
    message: Message = event.data.message
    if not message.content and event.type == "assistant/message":
        return None
    return message


def _context(event: Event) -> Message | None:
    """The context a ``tool/result`` adds to the next request, if any."""
    if event.type != "tool/result":
        return None
    context = getattr(event.data, "context", None)
    return context if isinstance(context, Message) else None


def _place(events: Iterable[Event], items: list[Message], pending: list[Message]) -> None:
    """Append what ``events`` (surface nodes, in order) derive to onto ``items``; the contexts
    of the open run of results wait in ``pending`` until a node that is not a result comes."""
    for event in events:
        if pending and event.type != "tool/result":
            items.extend(pending)
            pending.clear()
        message = derive(event)
        if message is not None:
            items.append(message)
        context = _context(event)
        if context is not None:
            pending.append(context)


def _view(items: list[Message], pending: list[Message]) -> MessagesView:
    # The contexts of an open run are not in ``items`` yet (a later result of the run goes
    # before them), so a view that shows them gets a list of its own.
    return MessagesView(items + pending if pending else items)


class _Derived:
    """The live cache: messages derived from the first ``consumed`` nodes of one generation,
    and the contexts of the run of results still open at its end."""

    __slots__ = ("consumed", "generation", "items", "pending", "view")

    def __init__(self, generation: int) -> None:
        self.generation = generation
        self.consumed = 0
        self.items: list[Message] = []
        self.pending: list[Message] = []
        self.view = MessagesView(self.items)


def messages(session: Session, at: int | None = None) -> MessagesView:
    """The model-visible history of ``session`` now, or as it stood after event ``at``.

    Now: O(1) when nothing reached the surface since the last call, O(new nodes) after appends,
    O(surface) after a replace. ``at``: a fold of events ``0..at`` (O(at)).

    :raises ValidationError: ``at`` is not between -1 and the session's head.
    """
    if at is not None:
        return _messages_at(session, at)
    index = session.surface_index
    cache: _Derived | None = session.projection_cache.get(_KEY)
    if cache is None or cache.generation != index.generation:
        cache = _Derived(index.generation)
        session.projection_cache[_KEY] = cache
    nodes = index.nodes
    if cache.consumed < len(nodes):
        # The surface's events are always held: the window reads them, O(1) each.
        event = session.window().event
        _place((event(seq) for seq in nodes[cache.consumed :]), cache.items, cache.pending)
        cache.consumed = len(nodes)
        cache.view = _view(cache.items, cache.pending)
    return cache.view


async def messages_at(session: Session, at: int) -> MessagesView:
    """``messages(session, at=at)`` on any session: the events it folds are read from the
    store where they are not in memory (a session opened from a snapshot), O(at).

    :raises ValidationError: ``at`` is not between -1 and the session's head.
    """
    return _derive_prefix(session, await read_through(session, at))


def _messages_at(session: Session, at: int) -> MessagesView:
    return _derive_prefix(session, list(events_through(session, at)))


def _derive_prefix(session: Session, prefix: list[Event]) -> MessagesView:
    index = fold_surface(prefix, session_id=session.id)
    items: list[Message] = []
    pending: list[Message] = []
    _place((prefix[seq] for seq in index.nodes), items, pending)
    return _view(items, pending)
