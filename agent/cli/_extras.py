"""Commands that need an optional extra import it through :func:`optional`, so a missing
extra is one line naming what to install, not a traceback."""

from __future__ import annotations

import importlib
from types import ModuleType

from ._errors import CliError

__all__ = ("optional",)


def optional(module: str, extra: str, what: str) -> ModuleType:
    """Import ``module`` (of the extra ``extra``) for ``what``.

    :raises CliError: the extra is not installed (exit 2).
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise CliError(
            f"{what} needs the {extra} extra: pip install 'agent-eventlog[{extra}]' ({exc})"
        ) from None
