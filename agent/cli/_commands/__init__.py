"""The subcommands, each a :class:`Command` in :data:`COMMANDS` (the order of ``--help``)."""

from __future__ import annotations

from .approvals import APPROVALS, APPROVE, DENY
from .audit import AUDIT
from .base import Command
from .follow import FOLLOW, FORK
from .importing import IMPORT
from .listing import SESSIONS, SHOW
from .recover import RECOVER
from .replay import REPLAY
from .serve import SERVE
from .transfer import EXPORT
from .verify import VERIFY

__all__ = (
    "COMMANDS",
    "Command",
    "APPROVALS",
    "APPROVE",
    "AUDIT",
    "DENY",
    "EXPORT",
    "FOLLOW",
    "FORK",
    "IMPORT",
    "RECOVER",
    "REPLAY",
    "SERVE",
    "SESSIONS",
    "SHOW",
    "VERIFY",
)

COMMANDS: tuple[Command, ...] = (
    SESSIONS,
    SHOW,
    REPLAY,
    AUDIT,
    VERIFY,
    RECOVER,
    APPROVALS,
    APPROVE,
    DENY,
    EXPORT,
    IMPORT,
    FOLLOW,
    FORK,
    SERVE,
)
