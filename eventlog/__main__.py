"""``python -m eventlog``: the ``eventlog`` command.

The command lives in ``agent.cli`` because it needs ``projections`` and ``recovery``, which
this package must not import (docs/architecture.md). Importing it by name at run time is the one
documented exception to the import-direction rule, allowed for this file only.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

__all__ = ("main",)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``eventlog`` command; return its exit code."""
    cli = importlib.import_module("agent.cli")
    code: int = cli.main(argv)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
