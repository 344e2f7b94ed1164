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

from eventlog import RequestHeader, Session, ToolSpec
from projections import messages

from ._model import ModelRequest

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


def last_header(session: Session) -> _Header:
    """The header in force at the end of the log (a field never set stays ``None``)."""
    system: str | None = None
    tools: tuple[ToolSpec, ...] | None = None
    model: str | None = None
    params: dict[str, Any] | None = None
    for event in session.events():
        if event.type != "request/header":
            continue
        data: RequestHeader = event.data
        system = data.system if data.system is not None else system
        tools = data.tools if data.tools is not None else tools
        model = data.model if data.model is not None else model
        params = data.params if data.params is not None else params
    return system, tools, model, params
