"""The store writer's rounds as a state machine: its states and every transition, in one place.

The writer (:class:`~eventlog.stores._writer.Writer`) makes each transition through its one
``_move``, which checks it against :data:`TRANSITIONS`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

import anyio

__all__ = ("TRANSITIONS", "Round", "RoundState")


class RoundState(enum.Enum):
    """Where the writer's rounds stand."""

    # Members are singletons: hashed by identity, in C (``Enum`` hashes the name in Python,
    # and every transition is looked up in TRANSITIONS).
    __hash__ = object.__hash__

    #: Not started yet: a round asked for fails at once (``ClosedError``).
    NEW = "new"
    #: No round asked for, none in flight.
    IDLE = "idle"
    #: The rounds task is asked for the next round; it takes what is queued when it runs.
    ASKED = "asked"
    #: A round's write is in flight.
    WRITING = "writing"
    #: A round's write is in flight and the next round was asked for meanwhile.
    WRITING_ASKED = "writing, next asked"
    #: Closed: commits are refused, a round asked for fails at once.
    CLOSED = "closed"


_S = RoundState
#: Every transition of :class:`RoundState`, with what makes it.
TRANSITIONS: dict[tuple[RoundState, RoundState], str] = {
    (_S.NEW, _S.IDLE): "the store starts the writer's tasks",
    (_S.IDLE, _S.ASKED): "a flush or the background writer asks for a round",
    (_S.IDLE, _S.WRITING): "a round is asked for while the pipeline is due: it starts at once",
    (_S.ASKED, _S.WRITING): "the rounds task opens the round, or the pipeline is due",
    (_S.ASKED, _S.IDLE): "the round opened found nothing queued",
    (_S.WRITING, _S.WRITING_ASKED): "a round is asked for while one is in flight",
    (_S.WRITING, _S.IDLE): "the round in flight ended",
    (_S.WRITING_ASKED, _S.IDLE): "the round in flight ended (the next is asked for again)",
    (_S.IDLE, _S.CLOSED): "the store closed, nothing pending",
    (_S.NEW, _S.CLOSED): "the store closed before the writer started",
}


class Round:
    """One write round; flush callers wait for its ``done``.

    :ivar pipelined: started at once by whoever asked (not by the rounds task).
    """

    __slots__ = ("done", "error", "pipelined")

    def __init__(self, new_event: Callable[[], anyio.Event] = anyio.Event) -> None:
        self.done = new_event()
        self.error: BaseException | None = None
        self.pipelined = False
