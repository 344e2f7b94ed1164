"""What a subcommand is: a name, a help line, its arguments and an async body."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from typing import NamedTuple

from .._context import Context

__all__ = ("Command", "add_salvage", "non_negative", "positive")


class Command(NamedTuple):
    """One subcommand. ``run`` returns the exit code."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, Context], Awaitable[int]]


def non_negative(text: str) -> int:
    """argparse type: a seq or count, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {value}")
    return value


def positive(text: str) -> int:
    """argparse type: a count, 1 or more."""
    value = non_negative(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected 1 or more, got {value}")
    return value


def add_salvage(parser: argparse.ArgumentParser) -> None:
    """``--salvage``: read a damaged log up to its first bad event instead of refusing it."""
    parser.add_argument(
        "--salvage",
        action="store_true",
        help="on a damaged log, use the events before the first bad one (still exits 1)",
    )
