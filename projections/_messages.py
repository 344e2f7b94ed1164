"""``messages(session)``: the model-visible history, derived from the surface.

See docs/architecture.md.

Each surface node derives to its event's message, except an ``assistant/message`` with empty
content, which derives to nothing (a step that only hosts usage). The live derivation keeps a
cached list on the session: pure appends extend it, a replace (noticed through the surface
index's ``generation``) starts a new one. Its cursor is (generation, surface nodes consumed)
rather than a next seq, because the surface index is already folded at commit by the log.

``messages(session, at=seq)`` folds the log prefix from scratch: what the model saw then.
"""

from __future__ import annotations

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


class _Derived:
    """The live cache: messages derived from the first ``consumed`` nodes of one generation."""

    __slots__ = ("consumed", "generation", "items", "view")

    def __init__(self, generation: int) -> None:
        self.generation = generation
        self.consumed = 0
        self.items: list[Message] = []
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
        items = cache.items
        for seq in nodes[cache.consumed :]:
            message = derive(event(seq))
            if message is not None:
                items.append(message)
        cache.consumed = len(nodes)
        cache.view = MessagesView(items)
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
    derived = (derive(prefix[seq]) for seq in index.nodes)
    return MessagesView([m for m in derived if m is not None])
