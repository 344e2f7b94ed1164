"""Ill-formed logs for the tests of the readers that report them.

``append`` refuses a log that breaks the turn and step structure, but logs written before those
rules existed still open (stored logs are folded, not judged), and the projections and
recovery must still report what is wrong with them. :func:`unchecked` gives such a log.
"""

from __future__ import annotations

from typing import Any

from eventlog import Session
from eventlog._grammar import TurnGrammar

__all__ = ("unchecked",)


class _Unjudged(TurnGrammar):
    """Folds like the real grammar, objects to nothing (what older versions did)."""

    def check(self, type_: str, data: Any) -> str | None:
        return None


def unchecked(session: Session) -> Session:
    """``session`` with the commit-time structural rules switched off, as in older versions."""
    grammar = _Unjudged()
    for event in session.window(0):
        grammar.advance(event.type, event.data)
    session._grammar = grammar
    return session
