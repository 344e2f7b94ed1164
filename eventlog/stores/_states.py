"""Which projection states a store's snapshots carry: ``open_store(url, snapshot_states=...)``.

The log layer imports nothing above it, yet a user who opens a store with ``open_store(url)``
and reads ``projections.timeline(session)`` must find the timeline in the session's snapshots,
as the agent does. So the option's default is a *reference*, not an import:
``"projections:SNAPSHOT_STATES"`` names the codecs ``projections`` exports (its timeline, inbox
and request header), and the store resolves it once, when it is built, the way a plugin entry
point is resolved. Pass a sequence of :class:`~eventlog.SnapshotState` instead to choose the
states yourself (``()``: snapshots carry none; a projection of your own beside the defaults:
``(*projections.SNAPSHOT_STATES, mine)``). Nothing is registered anywhere: two stores of one
process may carry different states.
"""

from __future__ import annotations

import importlib

from .._errors import ValidationError
from .._snapshot_state import SnapshotState, check_snapshot_states

__all__ = ("DEFAULT_SNAPSHOT_STATES", "resolve_snapshot_states")

#: Default of the ``snapshot_states`` option: the codecs ``projections`` exports.
DEFAULT_SNAPSHOT_STATES = "projections:SNAPSHOT_STATES"


def resolve_snapshot_states(option: object) -> tuple[SnapshotState, ...]:
    """The codecs ``option`` gives: a sequence of them, or a ``"module:attribute"`` reference
    to one (imported now). A reference whose module is not installed gives none.

    :raises ValidationError: not a sequence of :class:`SnapshotState` nor a reference to one.
    """
    if isinstance(option, str):
        module, _, name = option.partition(":")
        if not module or not name:
            raise ValidationError(
                f"option snapshot_states {option!r} is not a 'module:attribute' reference"
            )
        try:
            found = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            return ()
        option = getattr(found, name, None)
        if option is None:
            raise ValidationError(f"option snapshot_states: {module} has no {name}")
    return check_snapshot_states(option)
