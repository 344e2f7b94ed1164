"""Errors raised by the agent layer (leaves of :class:`eventlog.EventLogError`)."""

from __future__ import annotations

from eventlog import EventLogError, ValidationError

__all__ = ("AgentBusyError", "AgentConfigError", "CompactionError", "OpenTurnError")


class AgentBusyError(EventLogError, RuntimeError):
    """The agent is already running a turn (or compacting) and cannot start another."""


class OpenTurnError(EventLogError):
    """The session has a turn open that this agent did not start (a crash left it open)."""


class CompactionError(EventLogError, ValueError):
    """A compaction was refused: bad range, busy session, or a summary that does not shrink."""


class AgentConfigError(ValidationError, TypeError):
    """An agent-layer object (:class:`~agent.Agent`, a tool, a toolbox, a retry policy, a model
    adapter, ...) was built with an argument of the wrong type or out of range; nothing was
    built. The message names the argument, what it must be, and what was given.

    Both a :class:`TypeError` and a :class:`ValueError` (through
    :class:`~eventlog.ValidationError`), so either ``except`` catches it.
    """
