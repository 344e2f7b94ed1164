"""What a backend declares about its write rounds: data the store's writer reads once.

A backend states its abilities in one frozen value, :class:`BackendAbilities`, as a class
attribute (``abilities = BackendAbilities(pipeline=Pipeline.THREAD)``); the store's writer
reads it when the store is built and never probes the backend's type or methods for it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ("BackendAbilities", "Pipeline")


class Pipeline(enum.Enum):
    """How the writer writes many sessions flushing in step (see
    :class:`~eventlog.stores._writer.Writer`): as two alternating rounds, each written while
    the other half of the sessions commit on the event loop, or one round after another."""

    #: One round after another, each awaited by the writer's rounds task: the backend's write
    #: keeps the event loop busy (memory), so there is nothing to overlap.
    NONE = "none"
    #: Pipelined, each pipelined round's :meth:`~eventlog.stores.Backend.write` awaited in a
    #: task of its own: a database server writes the round while the loop goes on
    #: (PostgreSQL).
    TASK = "task"
    #: Pipelined, each pipelined round started with
    #: :meth:`~eventlog.stores.Backend.start_write` on the backend's own thread, no task waiting
    #: for it (SQLite).
    THREAD = "thread"


@dataclass(frozen=True)
class BackendAbilities:
    """The write abilities a backend declares.

    :ivar pipeline: how many sessions flushing in step are written (see :class:`Pipeline`);
        :attr:`Pipeline.THREAD` promises :meth:`~eventlog.stores.Backend.start_write`.
    """

    pipeline: Pipeline = Pipeline.NONE
