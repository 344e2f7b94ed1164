"""Where the command writes: rich tables on a terminal (colour only there), JSON for scripts.

Results go to stdout; warnings, errors and progress bars go to stderr so that ``--json`` output
and exported JSONL stay clean when piped. Both streams are :class:`~agent.cli._safe.SafeStream`
and the rich console escapes what it renders (:mod:`agent.cli._console`): stored content is
shown as data, never as terminal control sequences, whichever way a command prints it.

rich (extra ``cli``) is imported only when a command prints a table or panel; a command that
needs it without it says so in one line (exit 2), and ``--json`` never needs it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any, cast

import msgspec

from ._errors import CliError
from ._extras import optional
from ._safe import SafeStream

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ("Output", "ProgressHook")

#: Width used when stdout is not a terminal (and ``$COLUMNS`` is unset), so piped tables are
#: not squeezed to 80 columns.
_PIPE_WIDTH = 200

_encoder = msgspec.json.Encoder()


class ProgressHook:
    """Advance a progress bar by a number of units (events); a no-op without a terminal."""

    def __init__(self, progress: Any, task: Any) -> None:
        self._progress = progress
        self._task = task

    def advance(self, units: int) -> None:
        if self._progress is not None:
            self._progress.update(self._task, advance=units)


class Output:
    """The command's two streams.

    :param json_mode: print machine-readable JSON instead of tables.
    :param command: the command's name, for the one line saying it needs the ``cli`` extra.
    """

    def __init__(
        self,
        *,
        json_mode: bool,
        stdout: IO[str] | None = None,
        stderr: IO[str] | None = None,
        command: str = "",
    ) -> None:
        self.json_mode = json_mode
        self._raw_out = stdout if stdout is not None else sys.stdout
        self._raw_err = stderr if stderr is not None else sys.stderr
        # Typed as the streams they stand for: a command writes to them as to any text stream.
        self.stdout = cast(IO[str], SafeStream(self._raw_out))
        self.stderr = cast(IO[str], SafeStream(self._raw_err))
        self._command = command
        self._consoles: tuple[Console, Console] | None = None

    def _rich(self) -> tuple[Console, Console]:
        if self._consoles is None:
            what = f"`eventlog {self._command}` without --json".replace("  ", " ")
            module = optional("agent.cli._console", "cli", what)
            # rich writes its own colour codes, so it gets the raw streams; the console
            # escapes every character of what it renders (see agent.cli._console).
            self._consoles = (
                module.SafeConsole(self._raw_out, _width(self._raw_out)),
                module.SafeConsole(self._raw_err, _width(self._raw_err)),
            )
        return self._consoles

    @property
    def console(self) -> Console:
        """The rich console on stdout, for tables and panels.

        :raises CliError: the ``cli`` extra (rich) is not installed.
        """
        return self._rich()[0]

    @property
    def width(self) -> int:
        """The width tables and rows fit: the terminal's, else ``$COLUMNS`` or 200."""
        if self._consoles is not None:
            return self._consoles[0].width
        if not _isatty(self._raw_out):
            return _pipe_width()
        columns = os.environ.get("COLUMNS", "")  # as rich reads it: the caller's word first
        if columns.isdigit() and int(columns) > 0:
            return int(columns)
        try:
            size = os.get_terminal_size(self._raw_out.fileno()).columns
        except (OSError, ValueError):
            size = 0
        return size if size > 0 else 80  # a terminal that does not say its size

    def json(self, value: Any) -> None:
        """Print ``value`` (builtins or msgspec structs) as one indented JSON document."""
        self.stdout.write(msgspec.json.format(_encoder.encode(value), indent=2).decode())
        self.stdout.write("\n")
        self.stdout.flush()

    def line(self, text: str) -> None:
        """Print plain text (no markup, no highlighting) to stdout."""
        self.stdout.write(text + "\n")
        self.stdout.flush()

    def warn(self, text: str) -> None:
        """Print a one-line warning to stderr."""
        self.stderr.write(f"eventlog: warning: {text}\n")
        self.stderr.flush()

    @contextmanager
    def progress(self, total: int, description: str) -> Iterator[ProgressHook]:
        """A progress bar on stderr when it is a terminal, the work is long and rich is there."""
        if not _isatty(self._raw_err) or total < 1000:
            yield ProgressHook(None, None)
            return
        try:
            errors = self._rich()[1]
        except CliError:  # no rich: the work runs the same without a bar
            yield ProgressHook(None, None)
            return
        from ._console import progress_bar

        with progress_bar(errors, total, description) as (bar, task):
            yield ProgressHook(bar, task)


def _width(stream: IO[str]) -> int | None:
    return None if _isatty(stream) else _pipe_width()


def _pipe_width() -> int:
    """A pipe's width: ``$COLUMNS`` when the caller set it (``COLUMNS=80 eventlog … | less``),
    else :data:`_PIPE_WIDTH`."""
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else _PIPE_WIDTH


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
