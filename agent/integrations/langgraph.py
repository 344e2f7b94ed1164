"""LangGraph on eventlog: :class:`EventlogSaver`, a checkpointer (extra ``langgraph``).

Switching a compiled graph over::

    from agent.integrations.langgraph import EventlogSaver, langgraph_types

    async with open_store("sqlite:///sessions.db", types=langgraph_types()) as store:
        graph = builder.compile(checkpointer=EventlogSaver(store))

Every thread is one session, its checkpoints ``langgraph/checkpoint`` and its pending writes
``langgraph/writes`` events (ignorable: readers that do not know them still open the session).

The event types (:func:`langgraph_types`, :func:`register_langgraph_types`) and their payloads
import without LangGraph, so a reader such as the ``eventlog`` command can register them
whether the extra is installed or not; :class:`EventlogSaver` imports LangGraph when first
named.
"""

from typing import TYPE_CHECKING, Any

from eventlog import needs_extra as _needs_extra

from ._langgraph_events import (
    CHECKPOINT,
    WRITES,
    Blob,
    Checkpointed,
    Typed,
    Write,
    WritesPut,
    langgraph_types,
    register_langgraph_types,
    session_id_for,
)

if TYPE_CHECKING:
    from ._langgraph_saver import EventlogSaver, EventLoopThreadError

__all__ = (
    "CHECKPOINT",
    "WRITES",
    "Blob",
    "Checkpointed",
    "EventLoopThreadError",
    "EventlogSaver",
    "Typed",
    "Write",
    "WritesPut",
    "langgraph_types",
    "register_langgraph_types",
    "session_id_for",
)

_NEEDS_LANGGRAPH = frozenset({"EventLoopThreadError", "EventlogSaver"})


def __getattr__(name: str) -> Any:
    # The saver imports LangGraph (an optional extra): only when it is asked for.
    if name in _NEEDS_LANGGRAPH:
        with _needs_extra("langgraph", f"{__name__}.{name}", "langgraph", "langchain_core"):
            from . import _langgraph_saver

        return getattr(_langgraph_saver, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
