"""The rich side of the output (extra ``cli``): tables, panels, colour and progress bars.

Imported only when a command prints a table or a panel, so every command's ``--help`` (and
every ``--json`` output) works on the base install. The console never reads markup or emoji
codes (stored text such as ``[bold]`` or ``:warning:`` is shown as written) and every string
and text it renders goes through :func:`~agent.cli._safe.terminal_safe`, first where layout
is measured and once more on the way out, so no renderable can carry a control sequence of
the stored content to the terminal. Colour comes only from the styles the commands set.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import IO, Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeRemainingColumn,
)
from rich.segment import Segment
from rich.text import Text

from ._safe import terminal_safe

__all__ = ("SafeConsole", "progress_bar")


class SafeConsole(Console):
    """rich's console for stored content: no markup, no emoji codes, no highlighting, every
    character a terminal could act on escaped; a closed pipe ends the command the way every
    other write does."""

    def __init__(self, file: IO[str], width: int | None) -> None:
        super().__init__(file=file, width=width, markup=False, emoji=False, highlight=False)

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError  # main() treats the reader leaving as a normal end

    def render_str(self, text: str, **options: Any) -> Text:
        # Before layout, so tables measure the escaped text they will print.
        return super().render_str(terminal_safe(text), **options)

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        if isinstance(renderable, Text):
            plain = renderable.plain
            safe = terminal_safe(plain)
            if safe is not plain:
                renderable = renderable.copy()
                renderable.plain = safe
        return super().render(renderable, options)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        # The last stop before the stream: whatever a renderable produced, its text is escaped
        # here (rich's own control segments, such as a progress bar's cursor moves, pass).
        return super()._render_buffer(
            segment if segment.control else Segment(terminal_safe(segment.text), segment.style)
            for segment in buffer
        )


@contextmanager
def progress_bar(console: Console, total: int, description: str) -> Iterator[Any]:
    """A transient progress bar on ``console``; yields ``(bar, task)``."""
    # The spinner turns (rich refreshes from its own thread) while one long session loads.
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as bar:
        yield bar, bar.add_task(description, total=total)
