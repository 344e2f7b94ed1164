"""Building the model request, and the ``request/header`` that records what changed.

The request is frozen when sent: the session's immutable message view, the system prompt, the
tool schemas, the model name and its parameters. A ``request/header`` event is appended only
when one of those (other than the messages, which the log already holds) differs from the
header in force (:func:`~projections.request_header`), so an auditor can tell exactly what each
request contained.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from eventlog import RequestHeader, Session, ToolSpec
from projections import messages, request_header

from ._model import ModelRequest

__all__ = ("model_request",)


def model_request(
    session: Session,
    system: str,
    tools: tuple[ToolSpec, ...],
    model: str,
    params: Mapping[str, Any],
) -> ModelRequest:
    """The request to send now; first appends ``request/header`` with the fields that differ
    from the header in force (nothing when none does)."""
    params = dict(params)  # a copy: the caller may change its own
    last = request_header(session)
    changed = RequestHeader(
        system=system if system != last.system else None,
        tools=tools if tools != last.tools else None,
        model=model if model != last.model else None,
        params=params if params != last.params else None,
    )
    if changed != RequestHeader():
        session.append("request/header", changed)
    return ModelRequest(
        messages=messages(session),
        system=system,
        tools=tools,
        model=model,
        params=MappingProxyType(params),  # frozen
    )
