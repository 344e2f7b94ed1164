"""The error hierarchy: one root, leaves named after the condition.

Every error carries the location it is about (``session_id``, ``seq``) where there is one, and a
``hint`` for the operator where it helps. Messages are part of the contract: tests assert them.
"""

from __future__ import annotations

__all__ = (
    "AttachmentNotFoundError",
    "BacklogFullError",
    "ClosedError",
    "ConflictError",
    "CorruptLogError",
    "EventLogError",
    "EventNotLoadedError",
    "ImportRefusedError",
    "MissingExtraError",
    "ReentrancyError",
    "SessionBusyError",
    "SessionExistsError",
    "SessionNotFoundError",
    "StoreNotFoundError",
    "StoreWriteError",
    "SurfaceError",
    "UnknownEventTypeError",
    "UnsupportedFormatError",
    "ValidationError",
)


class EventLogError(Exception):
    """Root of every error this library raises on purpose.

    :param message: the human-readable text; it names the place (session, seq) itself.
    :param session_id: the session the error is about, if any.
    :param seq: the event position the error is about, if any.
    :param hint: what an operator can do about it, if anything useful can be said.
    """

    def __init__(
        self,
        message: str,
        *,
        session_id: str | None = None,
        seq: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.message = message
        self.session_id = session_id
        self.seq = seq
        self.hint = hint
        super().__init__(message if hint is None else f"{message} (hint: {hint})")


class ValidationError(EventLogError, ValueError):
    """An appended event (payload or envelope) is not valid; nothing was committed."""


class ImportRefusedError(ValidationError):
    """A session to import breaks a rule a commit is held to, or its rows are damaged;
    nothing was imported.

    :ivar field: what is at fault: a column of the event at ``seq`` (``type``, ``time``,
        ``surface``, ``sources``, ``ignorable``, ``data``, ``hash``), a field of the session's
        record when ``seq`` is ``None`` (``id``, ``created_at``, ``metadata``, ``parent_id``,
        ``fork_seq``, ``head``), or ``attachment``.
    """

    def __init__(
        self,
        message: str,
        *,
        field: str,
        session_id: str | None = None,
        seq: int | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, session_id=session_id, seq=seq, hint=hint)
        self.field = field


class UnknownEventTypeError(ValidationError):
    """The event type is not registered in the session's :class:`EventTypes`."""


class SurfaceError(ValidationError):
    """A surface operation is not allowed (bad ``Replace`` span, split tool call, ...)."""


class ReentrancyError(EventLogError, RuntimeError):
    """``append`` was called from inside an observer of the same session."""


class ConflictError(EventLogError):
    """Another writer advanced the stored log; this session object is fenced."""


class SessionBusyError(EventLogError):
    """The session is already open for writing by a live writer."""


class SessionNotFoundError(EventLogError, LookupError):
    """No session with that id exists in the store."""


class StoreNotFoundError(EventLogError, LookupError):
    """No eventlog store is where the URL points (a PostgreSQL schema without eventlog's
    tables), and the store was told not to create one; nothing was created."""


class SessionExistsError(EventLogError):
    """A session with that id already exists."""


class StoreWriteError(EventLogError, OSError):
    """Writing to the store failed; the batch is kept and the next flush retries it."""


class BacklogFullError(EventLogError):
    """Too many committed bytes are waiting to be written; the event was not committed."""


class CorruptLogError(EventLogError):
    """A stored event fails its integrity check (hash chain, seq order or decoding)."""


class UnsupportedFormatError(EventLogError):
    """The stored data uses a format this version cannot read (newer version, unknown type)."""


class ClosedError(EventLogError, RuntimeError):
    """The store or session is closed, fenced or read-only."""


class AttachmentNotFoundError(EventLogError, LookupError):
    """No attachment is stored under the digest a part references."""


class EventNotLoadedError(EventLogError, LookupError):
    """An event before a session's window (:meth:`Session.window`, what it holds in memory)
    was asked of the window, or the store no longer holds an event a complete read needs.
    Read older events with ``await session.events(from_seq)`` (from the store, then memory;
    docs/stores.md)."""


class MissingExtraError(EventLogError, ImportError):
    """Code that needs an optional extra was used without it installed; the message names the
    extra and the ``pip install 'agent-eventlog[...]'`` line that adds it.

    :param extra: the extra to install (``postgres``, ``otel``, ...).
    :param module: the missing module.
    """

    def __init__(self, message: str, *, extra: str, module: str) -> None:
        super().__init__(message)
        self.extra = extra
        self.name = module
