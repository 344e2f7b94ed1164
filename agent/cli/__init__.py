"""The ``eventlog`` command: list, replay, audit, verify, recover, export and import sessions.

It lives in the top layer because it needs ``projections`` and ``recovery``, which ``eventlog``
must not import; ``eventlog/__main__.py`` and the console script both run :func:`main`.
"""

from ._main import main

__all__ = ("main",)
