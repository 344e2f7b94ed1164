"""LangGraph on eventlog: :class:`EventlogSaver`, a checkpointer (extra ``langgraph``).

Switching a compiled graph over::

    from agent.integrations.langgraph import EventlogSaver, langgraph_types

    async with open_store("sqlite:///sessions.db", types=langgraph_types()) as store:
        graph = builder.compile(checkpointer=EventlogSaver(store))

Tool calls made crash-honest: ``ToolNode(tools)`` becomes ``DurableToolNode(tools, saver)``
(or pass :func:`durable_tool_calls`'s wrappers to your own ``ToolNode``): a call whose process
died in its body is answered ``TOOL_OUTCOME_UNKNOWN`` on resume, never run twice.

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
    from ._langgraph_tools import DurableToolNode, durable_tool_calls

__all__ = (
    "CHECKPOINT",
    "WRITES",
    "Blob",
    "Checkpointed",
    "DurableToolNode",
    "EventLoopThreadError",
    "EventlogSaver",
    "Typed",
    "Write",
    "WritesPut",
    "durable_tool_calls",
    "langgraph_types",
    "register_langgraph_types",
    "session_id_for",
)

_SAVER = frozenset({"EventLoopThreadError", "EventlogSaver"})
_TOOLS = frozenset({"DurableToolNode", "durable_tool_calls"})


def __getattr__(name: str) -> Any:
    # The saver imports LangGraph (an optional extra): only when it is asked for.
    if name in _SAVER | _TOOLS:
        with _needs_extra("langgraph", f"{__name__}.{name}", "langgraph", "langchain_core"):
            from . import _langgraph_saver, _langgraph_tools

        return getattr(_langgraph_saver if name in _SAVER else _langgraph_tools, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
