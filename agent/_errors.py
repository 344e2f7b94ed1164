"""Errors raised by the agent layer (leaves of :class:`eventlog.EventLogError`)."""

from __future__ import annotations

from eventlog import EventLogError

__all__ = ("AgentBusyError", "CompactionError", "OpenTurnError")


class AgentBusyError(EventLogError, RuntimeError):
    """The agent is already running a turn (or compacting) and cannot start another."""


class OpenTurnError(EventLogError):
    """The session has a turn open that this agent did not start (a crash left it open)."""


class CompactionError(EventLogError, ValueError):
    """A compaction was refused: bad range, busy session, or a summary that does not shrink."""
