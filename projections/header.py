"""``request_header(session)``: the model-request settings in force, the fold of ``request/header``.

A ``request/header`` event records only what changed (a field left ``None`` is unchanged), so
the settings in force after an event are each field's last non-``None`` value up to it. The
agent reads them to decide what the next ``request/header`` must carry (and, on resume, which
settings to keep); ``eventlog replay`` and the web audit read them to show what a request
contained. One fold serves both, so they cannot disagree.
"""

from __future__ import annotations

import msgspec

from eventlog import Event, RequestHeader, Session

from .base import catch_up, events_through, fold

__all__ = ("HeaderProjection", "REQUEST_HEADER", "request_header")

#: Before any ``request/header``: nothing set.
_NOTHING_SET = RequestHeader()


class HeaderProjection:
    """The fold of ``request/header`` events (see :mod:`projections.base`). Its state is an
    immutable :class:`~eventlog.RequestHeader`, handed to readers as it is."""

    key = "projections.request_header"

    def initial(self) -> RequestHeader:
        return _NOTHING_SET

    def apply(self, state: RequestHeader, event: Event) -> RequestHeader:
        if event.type != "request/header":
            return state
        changed: RequestHeader = event.data
        fields = {
            name: value
            for name in RequestHeader.__struct_fields__
            if (value := getattr(changed, name)) is not None
        }
        return msgspec.structs.replace(state, **fields) if fields else state


#: The one request-header projection instance.
REQUEST_HEADER = HeaderProjection()


def request_header(session: Session, *, at: int | None = None) -> RequestHeader:
    """The request settings in force in ``session`` now, or as they stood after event ``at``:
    each field's last non-``None`` value in a ``request/header``, ``None`` when never set.

    Now: O(new events) per call. ``at``: a fold of events ``0..at`` (O(at)).

    :raises ValidationError: ``at`` is not between -1 and the session's head.
    """
    if at is not None:
        return fold(REQUEST_HEADER, events_through(session, at))
    return catch_up(session, REQUEST_HEADER)
