"""Where the command writes: rich tables on a terminal (colour only there), JSON for scripts.

Results go to stdout; warnings, errors and progress bars go to stderr so that ``--json`` output
and exported JSONL stay clean when piped.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

import msgspec
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeRemainingColumn,
)

__all__ = ("Output", "ProgressHook")

#: Width used when stdout is not a terminal (and ``$COLUMNS`` is unset), so piped tables are
#: not squeezed to 80 columns.
_PIPE_WIDTH = 200

_encoder = msgspec.json.Encoder()


class _Console(Console):
    """rich's console, but a closed pipe ends the command the way every other write does."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError  # main() treats the reader leaving as a normal end


class ProgressHook:
    """Advance a progress bar by a number of units (events); a no-op without a terminal."""

    def __init__(self, progress: Progress | None, task: Any) -> None:
        self._progress = progress
        self._task = task

    def advance(self, units: int) -> None:
        if self._progress is not None:
            self._progress.update(self._task, advance=units)


class Output:
    """The command's two streams.

    :param json_mode: print machine-readable JSON instead of tables.
    """

    def __init__(
        self, *, json_mode: bool, stdout: IO[str] | None = None, stderr: IO[str] | None = None
    ) -> None:
        self.json_mode = json_mode
        out = stdout if stdout is not None else sys.stdout
        err = stderr if stderr is not None else sys.stderr
        self.stdout = out
        self.console = _Console(file=out, width=None if _isatty(out) else _pipe_width())
        self.errors = _Console(file=err, width=None if _isatty(err) else _pipe_width())

    def json(self, value: Any) -> None:
        """Print ``value`` (builtins or msgspec structs) as one indented JSON document."""
        self.stdout.write(msgspec.json.format(_encoder.encode(value), indent=2).decode())
        self.stdout.write("\n")
        self.stdout.flush()

    def line(self, text: str) -> None:
        """Print plain text (no markup, no highlighting) to stdout."""
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def warn(self, text: str) -> None:
        """Print a one-line warning to stderr."""
        self.errors.print(
            f"eventlog: warning: {text}", markup=False, highlight=False, soft_wrap=True
        )

    @contextmanager
    def progress(self, total: int, description: str) -> Iterator[ProgressHook]:
        """A progress bar on stderr when it is a terminal and the work is long."""
        if not self.errors.is_terminal or total < 1000:
            yield ProgressHook(None, None)
            return
        # The spinner turns (rich refreshes from its own thread) while one long session loads.
        with Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=self.errors,
            transient=True,
        ) as bar:
            yield ProgressHook(bar, bar.add_task(description, total=total))


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
