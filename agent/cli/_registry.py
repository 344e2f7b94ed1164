"""The event-type registry the command reads with: the integrations' types, then the app's.

``--types module:attribute`` (repeatable) names an app's registry: an :class:`EventTypes`, a
function returning one (``langgraph_types``), or a function registering into the one it is
given (``register_langgraph_types``). The integrations' own types are always registered,
whether their frameworks are installed or not (they import without them).
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from eventlog import EventLogError, EventTypes

from ..integrations import (
    register_langgraph_types,
    register_openai_agents_types,
    register_pydantic_ai_types,
)
from ._errors import CliError

__all__ = ("DEFAULT_REGISTRIES", "load_types")

#: Registered in every registry the command reads with.
DEFAULT_REGISTRIES: tuple[Callable[[EventTypes], EventTypes], ...] = (
    register_langgraph_types,
    register_openai_agents_types,
    register_pydantic_ai_types,
)


def load_types(specs: Sequence[str] = ()) -> EventTypes:
    """The core vocabulary, the integrations' types, and each ``module:attribute`` in ``specs``.

    :raises CliError: a spec is malformed, its module does not import, its attribute is
        missing or is not a registry, calling it raises, or it registers a name already
        registered with another payload (exit code 2, naming the spec).
    """
    types = EventTypes()
    for register in DEFAULT_REGISTRIES:
        register(types)
    for spec in specs:
        _include(types, _resolve(spec), spec)
    return types


def _resolve(spec: str) -> Any:
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise CliError(f"--types {spec!r}: expected module:attribute, e.g. myapp.events:TYPES")
    if os.getcwd() not in sys.path and "" not in sys.path:
        # As ``python -m`` and uvicorn do: the app's modules import from where it is run.
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # any import failure is the user's spec: say which and why
        raise CliError(f"--types {spec!r}: cannot import {module_name!r}: {exc}") from exc
    value: Any = module
    for name in attribute.split("."):
        if not hasattr(value, name):
            raise CliError(f"--types {spec!r}: {module_name!r} has no attribute {attribute!r}")
        value = getattr(value, name)
    return value


def _include(types: EventTypes, value: Any, spec: str) -> None:
    try:
        if callable(value) and not isinstance(value, EventTypes):
            if _takes_registry(value):
                _call(value, spec, types)
                return
            value = _call(value, spec)
        if not isinstance(value, EventTypes):
            raise CliError(
                f"--types {spec!r}: expected an EventTypes, or a function returning one or "
                f"registering into one, got {type(value).__name__}"
            )
        _merge(types, value, spec)
    except EventLogError as exc:
        raise CliError(f"--types {spec!r}: {exc}") from exc


def _call(function: Callable[..., Any], spec: str, *args: Any) -> Any:
    try:
        return function(*args)
    except EventLogError:
        raise  # named with the spec by the caller
    except Exception as exc:  # the app's code failing is the user's spec: say which and why
        raise CliError(f"--types {spec!r}: calling it raised {type(exc).__name__}: {exc}") from exc


def _takes_registry(function: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    required = [
        p
        for p in parameters
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    return len(required) == 1


def _merge(types: EventTypes, other: EventTypes, spec: str) -> None:
    for name in other:
        theirs = other.get(name)
        ours = types.get(name)
        assert theirs is not None
        if ours is None:
            types.include(theirs)
        elif ours.payload is not theirs.payload or ours.version != theirs.version:
            raise CliError(
                f"--types {spec!r}: event type {name!r} is already registered with "
                f"{ours.payload.__name__} (version {ours.version}), not "
                f"{theirs.payload.__name__} (version {theirs.version})"
            )
