"""An agent's arguments, checked before anything is built (or, for :meth:`Agent.resume`, before
the session is opened and repaired): each wrong one is an :class:`~agent.AgentConfigError`
naming it, never an ``AttributeError`` from the middle of a later turn.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from eventlog import Session, Store

from ._checks import check_count, check_optional_str, check_params, check_str, refuse
from ._compaction import AutoCompaction
from ._hooks import Hooks
from ._model import Model, check_model
from ._retry import RetryPolicy
from ._tools import Body, Tool, Toolbox

__all__ = ("AgentOptions", "agent_options", "check_session")

_WHERE = "Agent"


@dataclass(frozen=True, slots=True)
class AgentOptions:
    """The checked options of an :class:`~agent.Agent` (see its docstring)."""

    toolbox: Toolbox
    system: str
    params: dict[str, Any]
    model_name: str
    max_parallel: int
    retry: RetryPolicy
    max_steps: int
    compaction: AutoCompaction | None
    store: Store | None
    hooks: Hooks


def check_session(session: object) -> Session:
    """An open, writable :class:`~eventlog.Session`."""
    if not isinstance(session, Session):
        raise refuse(
            _WHERE, "session", "an eventlog Session (from store.create or store.open)", session
        )
    if session.read_only:
        raise refuse(_WHERE, "session", "writable (this one was opened read-only)", session)
    return session


def agent_options(
    model: Model,
    tools: Iterable[Tool | Body] | None = (),
    *,
    system: str = "",
    params: Mapping[str, Any] | None = None,
    model_name: str | None = None,
    max_parallel: int = 10,
    retry: RetryPolicy | None = None,
    max_steps: int = 64,
    compaction: AutoCompaction | None = None,
    store: Store | None = None,
    before_step: object = None,
    should_continue: object = None,
) -> AgentOptions:
    """The options of an agent of ``model``, checked (the parameters of
    :class:`~agent.Agent`).

    :raises AgentConfigError: an argument of the wrong type or out of range.
    """
    model = check_model(_WHERE, model)
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise refuse(_WHERE, "retry", "a RetryPolicy or None", retry)
    if compaction is not None and not isinstance(compaction, AutoCompaction):
        raise refuse(_WHERE, "compaction", "an AutoCompaction or None", compaction)
    if store is not None and not all(
        callable(getattr(store, method, None)) for method in ("get_attachment", "put_attachment")
    ):
        raise refuse(_WHERE, "store", "the session's Store (from open_store) or None", store)
    name = check_optional_str(_WHERE, "model_name", model_name)
    hooks = Hooks(before_step, should_continue)
    return AgentOptions(
        toolbox=tools if isinstance(tools, Toolbox) else Toolbox(tools, where=_WHERE),
        system=check_str(_WHERE, "system", system),
        params=check_params(_WHERE, params),
        model_name=model.name if name is None else name,
        max_parallel=check_count(_WHERE, "max_parallel", max_parallel, 1),
        retry=RetryPolicy() if retry is None else retry,
        max_steps=check_count(_WHERE, "max_steps", max_steps, 1),
        compaction=compaction,
        store=store,
        hooks=hooks,
    )
