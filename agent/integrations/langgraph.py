"""LangGraph on eventlog: :class:`EventlogSaver`, a checkpointer (extra ``langgraph``).

Switching a compiled graph over::

    from agent.integrations.langgraph import EventlogSaver, langgraph_types

    async with open_store("sqlite:///sessions.db", types=langgraph_types()) as store:
        graph = builder.compile(checkpointer=EventlogSaver(store))

Every thread is one session, its checkpoints ``langgraph/checkpoint`` and its pending writes
``langgraph/writes`` events (ignorable: readers that do not know them still open the session).
"""

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
