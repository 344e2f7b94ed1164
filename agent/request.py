"""Building the model request, and the ``request/header`` that records what changed.

The request is frozen when sent: the session's immutable message view, the system prompt, the
tool schemas, the model name and its parameters. A ``request/header`` event is appended only
when one of those (other than the messages, which the log already holds) differs from the
header in force, so an auditor can tell exactly what each request contained.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import msgspec

from eventlog import Event, RequestHeader, Session, SnapshotState, ToolSpec, register_snapshot_state
from projections import messages
from projections.base import catch_up

from .model import ModelRequest

__all__ = ("HeaderTracker", "last_header")

_Header = tuple[str | None, tuple[ToolSpec, ...] | None, str | None, dict[str, Any] | None]


class HeaderTracker:
    """Knows the header in force for ``session`` (folded from its log once, then tracked)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.current = last_header(session)

    def request(
        self, system: str, tools: tuple[ToolSpec, ...], model: str, params: Mapping[str, Any]
    ) -> ModelRequest:
        """The request to send now; appends ``request/header`` with the fields that changed."""
        now = (system, tools, model, dict(params))
        last = self.current
        if now != last:
            changed = RequestHeader(
                system=system if system != last[0] else None,
                tools=tools if tools != last[1] else None,
                model=model if model != last[2] else None,
                params=now[3] if now[3] != last[3] else None,
            )
            self.session.append("request/header", changed)
            self.current = now
        return ModelRequest(
            messages=messages(self.session),
            system=system,
            tools=tools,
            model=model,
            params=MappingProxyType(now[3]),  # a copy, frozen: the caller may change its own
        )


class _HeaderFold:
    """The header in force as a fold over the log, cached on the session (and carried by its
    snapshots, so a session opened from one knows it without reading older events)."""

    key = "agent.request_header"

    def initial(self) -> _Header:
        return (None, None, None, None)

    def apply(self, state: _Header, event: Event) -> _Header:
        if event.type != "request/header":
            return state
        data: RequestHeader = event.data
        system, tools, model, params = state
        return (
            data.system if data.system is not None else system,
            data.tools if data.tools is not None else tools,
            data.model if data.model is not None else model,
            data.params if data.params is not None else params,
        )


_HEADER = _HeaderFold()
_header_decoder = msgspec.msgpack.Decoder(_Header)

register_snapshot_state(
    SnapshotState(
        key=_HEADER.key,
        version=1,
        encode=msgspec.msgpack.encode,
        decode=_header_decoder.decode,
        initial=_HEADER.initial,
        apply=_HEADER.apply,
    )
)


def last_header(session: Session) -> _Header:
    """The header in force at the end of the log (a field never set stays ``None``)."""
    return catch_up(session, _HEADER)
