"""Reading a stored log into a :class:`LogLoader`: the whole log, or the part after a
snapshot (see :meth:`~eventlog.Store.open`)."""

from __future__ import annotations

from .._codec import Row
from .._errors import CorruptLogError, EventLogError
from .._registry import EventTypes
from ._base import Backend
from ._loader import LogLoader
from ._snapshots import Restored, keep_surface_rows

__all__ = ("load_after", "load_log")


async def load_log(
    backend: Backend,
    types: EventTypes,
    sid: str,
    *,
    salvage: bool,
    limit: int | None = None,
    rows: dict[int, Row] | None = None,
) -> tuple[LogLoader, EventLogError | None]:
    """Decode, verify and fold a stored log (see :meth:`Store.open`), at most ``limit``
    events of it; ``rows``, when given, gets the rows of the surface's events once the
    session has compacted (see :func:`keep_surface_rows`: about the surface's size).

    With ``salvage`` the error that stopped loading is returned instead of raised.
    """
    loader = LogLoader(types, sid)
    try:
        async for chunk in backend.read_rows(sid, 0, limit):
            loader.feed(chunk)
            if rows is not None and loader.surface.generation:
                keep_surface_rows(rows, chunk, loader.surface)
    except CorruptLogError as exc:
        if not salvage:
            raise
        return loader, exc
    except EventLogError as exc:
        if not salvage or exc.seq is None:
            raise
        return loader, exc
    return loader, None


async def load_after(
    backend: Backend,
    types: EventTypes,
    sid: str,
    restored: Restored,
    rows: dict[int, Row] | None = None,
) -> LogLoader:
    """A loader resumed from ``restored`` and fed the stored rows after it; ``rows``, when
    given, gets the surface rows read after it."""
    loader = LogLoader(types, sid)
    loader.resume(
        head=restored.head,
        last_hash=restored.hash,
        surface=restored.surface,
        grammar=restored.grammar,
        pinned=restored.pinned,
    )
    async for chunk in backend.read_rows(sid, restored.seq + 1, None):
        loader.feed(chunk)
        if rows is not None:
            keep_surface_rows(rows, chunk, loader.surface)
    return loader
