"""``python -m eventlog``: the ``eventlog`` command, as the installed console script runs it.

The command needs ``projections`` and ``recovery``, which this package must not import
(docs/architecture.md), so it lives in a layer above. This module names nothing of that layer:
it runs the function the installed ``agent-eventlog`` distribution declares as its ``eventlog``
console script (``[project.scripts]`` in ``pyproject.toml``), the same one the ``eventlog``
executable runs. Without that declaration (a checkout put on ``sys.path`` without installing
it) it says so in one line and exits 2.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from importlib import metadata

__all__ = ("main",)

#: The distribution this package ships in (``eventlog`` on the package index is another
#: project's), and the console script it declares.
DISTRIBUTION = "agent-eventlog"
SCRIPT = "eventlog"
#: The command's exit code for a command line it cannot run.
EXIT_USAGE = 2

Command = Callable[[Sequence[str] | None], int]


def command() -> Command | None:
    """The function the ``eventlog`` console script runs, or ``None`` when the distribution
    is not installed or declares no such script. Loading it imports its module."""
    try:
        scripts = metadata.distribution(DISTRIBUTION).entry_points
    except metadata.PackageNotFoundError:
        return None
    found = scripts.select(group="console_scripts", name=SCRIPT)
    if not found:
        return None
    run: Command = next(iter(found)).load()
    return run


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``eventlog`` command with ``argv`` (default: the process's); return its exit
    code, or :data:`EXIT_USAGE` with one line on stderr when the command is not installed."""
    run = command()
    if run is None:
        print(
            f"python -m eventlog: the {SCRIPT!r} console script of {DISTRIBUTION} is not "
            f"installed: pip install {DISTRIBUTION} (in a checkout: pip install -e .)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    return run(argv)


if __name__ == "__main__":
    raise SystemExit(main())
