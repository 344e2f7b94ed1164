"""Tables that fit the terminal: columns wrap (never cut with an ellipsis), and when even
wrapped they cannot fit, the least important columns are dropped first."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from ._safe import terminal_safe

if TYPE_CHECKING:
    from rich.table import Table

__all__ = ("Column", "fitted_table", "kept_columns", "styled")

#: What a column costs beyond its text in rich's default box: a border and a space each side.
_CELL_FRAME = 3


class Column(NamedTuple):
    """One column of a fitted table.

    :ivar priority: higher stays longer; the lowest is dropped first when space runs out.
    :ivar min_width: the narrowest the column may wrap to (at least its header).
    """

    name: str
    priority: int
    min_width: int = 0
    justify: Literal["left", "right"] = "left"

    @property
    def narrowest(self) -> int:
        return max(self.min_width, len(self.name))


def kept_columns(
    columns: Sequence[Column], width: int, narrowest: Mapping[str, int] | None = None
) -> list[Column]:
    """The columns that fit ``width`` at their narrowest, in their original order: by falling
    priority, each is kept while the total still fits (the top one is always kept)."""
    least = narrowest or {c.name: c.narrowest for c in columns}
    kept: set[str] = set()
    used = 1  # the table's closing border
    for column in sorted(columns, key=lambda c: -c.priority):
        cost = least[column.name] + _CELL_FRAME
        if kept and used + cost > width:
            continue
        kept.add(column.name)
        used += cost
    return [c for c in columns if c.name in kept]


#: A word longer than this may be folded inside its cell rather than widen its column.
_LONGEST_WORD = 24


def _plain(cell: Any) -> str:
    # As the console prints it: no markup, every unsafe character escaped.
    return terminal_safe(cell.plain if hasattr(cell, "plain") else str(cell))


def _longest_word(cell: Any) -> int:
    return min(_LONGEST_WORD, max((len(word) for word in _plain(cell).split()), default=0))


def fitted_table(columns: Sequence[Column], rows: Sequence[Mapping[str, Any]], width: int) -> Table:
    """A rich table of ``rows`` (column name -> cell) that fits ``width`` characters: each
    column is at least as wide as its longest word (up to 24), so words wrap whole, and the
    room left goes to the most important columns first (needs rich: extra ``cli``)."""
    from rich.table import Table

    narrowest = {
        c.name: max([c.narrowest, *(_longest_word(row[c.name]) for row in rows)]) for c in columns
    }
    kept = kept_columns(columns, width, narrowest)
    widths = {c.name: narrowest[c.name] for c in kept}
    room = width - 1 - sum(widths[c.name] + _CELL_FRAME for c in kept)
    for column in sorted(kept, key=lambda c: -c.priority):
        natural = max([len(column.name), *(len(_plain(row[column.name])) for row in rows)])
        grow = max(0, min(room, natural - widths[column.name]))
        widths[column.name] += grow
        room -= grow
    table = Table()
    for column in kept:
        table.add_column(
            column.name, width=widths[column.name], overflow="fold", justify=column.justify
        )
    for row in rows:
        table.add_row(*(row[c.name] for c in kept))
    return table


def styled(text: str, style: str) -> Any:
    """``text`` as one cell in ``style`` (a rich Text; needs rich: extra ``cli``)."""
    from rich.text import Text

    # Escaped before rich sees it: its Text drops some control characters (BEL, CR...),
    # and stored text is shown as data, not trimmed. A span, so padding stays unstyled.
    return Text.styled(terminal_safe(text), style)
