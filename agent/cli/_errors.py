"""Exit codes and the one-line error the command prints instead of a traceback.

One rule for every command (docs/cli.md): 0 when what the command looked at is intact and
owes nothing (``balanced``, or ``running``: a live writer's open turn is work in progress);
1 for a finding: a damaged log or file, a session that needs repair (a turn open with no live
writer), and for ``audit`` also what went wrong in the run; 2 when the command could not run.
"""

from __future__ import annotations

from collections.abc import Iterable

from eventlog import CorruptLogError, EventLogError, UnsupportedFormatError

from ..report import FINDING_STATES

__all__ = (
    "EXIT_FINDINGS",
    "EXIT_OK",
    "EXIT_USAGE",
    "CliError",
    "exit_code_for",
    "is_finding",
    "one_line",
    "states_exit",
)

#: Everything is fine.
EXIT_OK = 0
#: The command ran and found something: a broken hash chain, a session needing repair.
EXIT_FINDINGS = 1
#: The command could not run: bad arguments, a bad URL, a missing session or file.
EXIT_USAGE = 2


class CliError(Exception):
    """An error the command reports in one line and exits with ``code``."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def one_line(text: str) -> str:
    """``text`` folded onto one line (driver messages sometimes carry newlines)."""
    return " ".join(text.split())


def is_finding(exc: EventLogError) -> bool:
    """A damaged or unreadable *session log* is a finding; anything else is an input error."""
    return isinstance(exc, CorruptLogError | UnsupportedFormatError) and exc.session_id is not None


def exit_code_for(exc: EventLogError, command: str | None = None) -> int:
    """The exit code of a library error that ends ``command``. For ``verify``, whose job is
    finding damage, a damaged database file is a finding too (not only a damaged log)."""
    if command == "verify" and isinstance(exc, CorruptLogError | UnsupportedFormatError):
        return EXIT_FINDINGS
    return EXIT_FINDINGS if is_finding(exc) else EXIT_USAGE


def states_exit(states: Iterable[str]) -> int:
    """The exit code of sessions in ``states`` (:data:`~agent.report.SessionState` words):
    :data:`EXIT_FINDINGS` when one is ``corrupt`` or ``needs repair``, else :data:`EXIT_OK`."""
    return EXIT_FINDINGS if any(state in FINDING_STATES for state in states) else EXIT_OK
