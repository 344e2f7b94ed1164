"""The envelope checks of ``Session.append`` beyond the payload: the surface operation against
the event's type, the sources, an explicitly given time. Each raises a
:class:`~eventlog.ValidationError` naming the session, the seq and the type; none changes
anything.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._errors import ValidationError
from ._event import Append, Replace, SurfaceOp
from ._strict import INT64_MAX

__all__ = ("check_envelope", "given_time")


def check_envelope(
    session_id: str,
    seq: int,
    type_: str,
    is_surface_type: bool,
    surface: SurfaceOp | None,
    sources: Sequence[int],
) -> tuple[int, ...]:
    """The sources as a tuple, once the surface operation and the sources are checked.

    :raises ValidationError: the operation is not one, not allowed on this type (or missing
        on a surface type), or a source is not the seq of an earlier event, or named twice.
    """
    where = f"session {session_id!r}, seq {seq}, type {type_!r}"
    _check_surface(session_id, seq, where, is_surface_type, surface)
    if not sources:
        return ()
    try:
        result = tuple(sources)
    except TypeError:
        raise ValidationError(
            f"{where}: sources must be a sequence of seqs, got {type(sources).__name__}",
            session_id=session_id,
            seq=seq,
        ) from None
    for source in result:
        if type(source) is not int or not 0 <= source < seq:
            raise ValidationError(
                f"{where}: source {source!r} is not the seq of an earlier event (0..{seq - 1})",
                session_id=session_id,
                seq=seq,
            )
    if len(set(result)) != len(result):
        raise ValidationError(
            f"{where}: sources {list(result)} name the same event twice",
            session_id=session_id,
            seq=seq,
        )
    return result


def _check_surface(
    session_id: str, seq: int, where: str, is_surface_type: bool, surface: SurfaceOp | None
) -> None:
    if surface is not None and not isinstance(surface, Append | Replace):
        raise ValidationError(
            f"{where}: surface must be APPEND, Replace(start, end) or None, got {surface!r}",
            session_id=session_id,
            seq=seq,
        )
    if isinstance(surface, Replace) and not (
        type(surface.start) is int and type(surface.end) is int
    ):
        # A bool would pass as a seq here and be stored as 'replace:False:False'.
        raise ValidationError(
            f"{where}: Replace start and end must be ints (seqs), got {surface!r}",
            session_id=session_id,
            seq=seq,
        )
    if is_surface_type and surface is None:
        raise ValidationError(
            f"{where}: a surface type needs a surface operation (APPEND or Replace)",
            session_id=session_id,
            seq=seq,
        )
    if not is_surface_type and surface is not None:
        raise ValidationError(
            f"{where}: only user/message, assistant/message and tool/result take a "
            "surface operation",
            session_id=session_id,
            seq=seq,
        )


def given_time(session_id: str, seq: int, time: object) -> int:
    """An explicitly given time, checked.

    :raises ValidationError: not epoch milliseconds (an int from 0 to 2**63 - 1).
    """
    if type(time) is not int or not 0 <= time <= INT64_MAX:
        raise ValidationError(
            f"session {session_id!r}, seq {seq}: time {time!r} is not epoch milliseconds "
            "(an int from 0 to 2**63 - 1)",
            session_id=session_id,
            seq=seq,
        )
    return time
