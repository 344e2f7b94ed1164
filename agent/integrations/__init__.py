"""Framework backends: stores that existing agent frameworks plug into (docs/architecture.md).

Each integration is a module of its own (``agent.integrations.langgraph``), importing its
framework only when imported itself: the framework is an optional extra.
"""

__all__ = ()
