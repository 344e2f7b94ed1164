"""Framework backends: stores that existing agent frameworks plug into (docs/architecture.md).

Each integration is a module of its own (``agent.integrations.langgraph``), importing its
framework only when imported itself: the framework is an optional extra. This package itself
imports none: it exports the registrations of each integration's event types, which readers
that never run the framework (the ``eventlog`` command) use to open its sessions.
"""

from ._langgraph_events import register_langgraph_types
from ._openai_agents_events import register_openai_agents_types
from ._pydantic_ai_events import register_pydantic_ai_types

__all__ = (
    "register_langgraph_types",
    "register_openai_agents_types",
    "register_pydantic_ai_types",
)
