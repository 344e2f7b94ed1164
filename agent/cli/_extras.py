"""Commands that need an optional extra import it through :func:`optional`, so a missing
extra is one line naming what to install, not a traceback."""

from __future__ import annotations

import importlib
from types import ModuleType

from eventlog import MissingExtraError

from ._errors import CliError

__all__ = ("optional",)


def optional(module: str, extra: str, what: str) -> ModuleType:
    """Import ``module`` (of the extra ``extra``) for ``what``.

    :raises CliError: the extra is not installed (exit 2).
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        # A package that says which extra it needs says it for itself; the command says it
        # for the command, naming the module that is missing either way.
        missing = exc.__cause__ if isinstance(exc, MissingExtraError) else exc
        raise CliError(
            f"{what} needs the {extra} extra: pip install 'agent-eventlog[{extra}]' ({missing})"
        ) from None
