"""Projections: pure folds over a session's events, caught up lazily when read (DESIGN §6)."""

from .timeline import (
    CallKey,
    CallStatus,
    Finding,
    OpenStep,
    OpenTurn,
    Timeline,
    ToolCallState,
    timeline,
)

__all__ = (
    "CallKey",
    "CallStatus",
    "Finding",
    "OpenStep",
    "OpenTurn",
    "Timeline",
    "ToolCallState",
    "timeline",
)
