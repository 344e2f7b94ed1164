"""The ``eventlog`` command: list, replay, audit, verify, recover, export and import sessions.

It lives in the top layer because it needs ``projections`` and ``recovery``, which ``eventlog``
must not import. :func:`main` is the distribution's ``eventlog`` console script, which
``python -m eventlog`` looks up and runs without naming this package.
"""

from ._main import main

__all__ = ("main",)
