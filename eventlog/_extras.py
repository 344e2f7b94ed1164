"""Optional extras: code that needs one imports it inside :func:`needs_extra`, so a missing
extra is a :class:`~eventlog.MissingExtraError` naming what to install, not a bare
``ModuleNotFoundError`` from deep inside the package."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ._errors import MissingExtraError

__all__ = ("needs_extra",)


@contextmanager
def needs_extra(extra: str, what: str, *modules: str) -> Iterator[None]:
    """Run the imports of the body; if one of the top-level ``modules`` (the packages the extra
    ``extra`` installs) is missing, say so for ``what``.

    A missing module that is not one of ``modules`` is not the extra's: its
    ``ModuleNotFoundError`` passes unchanged, so a broken install is not misreported.

    :raises MissingExtraError: one of ``modules`` is not installed.
    """
    try:
        yield
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in modules:
            raise
        raise MissingExtraError(
            f"{what} needs the {extra} extra: pip install 'agent-eventlog[{extra}]' ({exc})",
            extra=extra,
            module=exc.name or "",
        ) from exc
