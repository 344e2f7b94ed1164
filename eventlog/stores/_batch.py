"""What the store's writer hands a backend: one :class:`Batch` per session of a round, and
the shapes of the calls that write a round."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import NamedTuple

from .._codec import Row

__all__ = ("Batch", "StartWrite", "WriteDone", "WriteFunction")


class Batch(NamedTuple):
    """The rows of one session written in one round.

    ``expected_head`` is the stored head the rows continue (``rows[0].seq - 1``); the store must
    refuse the batch (report a conflict) when the stored head differs.
    """

    session_id: str
    expected_head: int
    rows: Sequence[Row]


#: ``await write(batches)`` writes every batch in one transaction and returns the ids of the
#: sessions whose ``expected_head`` did not match (those rows were not written).
WriteFunction = Callable[[Sequence[Batch]], Awaitable[Collection[str]]]

#: Called on the event loop's thread when a started write ended: the conflicting session ids
#: (as :data:`WriteFunction` returns them), or the error.
WriteDone = Callable[[Collection[str], BaseException | None], None]

#: ``start(batches, done)`` starts the same write as :data:`WriteFunction` off the event loop's
#: thread (a backend's writer thread) and returns at once; ``done`` is called when it ended.
#: Whoever called it, no task waits for the write, so a cancelled caller never cancels it.
StartWrite = Callable[[Sequence[Batch], WriteDone], None]
