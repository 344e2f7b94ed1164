"""Checking a session before it is imported: held to the rules a commit is held to, by the code
that holds commits to them.

An exported session arrives as its record and its stored rows. :func:`check_import` refuses
(:class:`~eventlog.ImportRefusedError`, naming the seq and the field) anything ``store.create``
and ``Session.append`` would have refused, and anything ``open`` could not load:

1. the record goes through what ``create`` checks (the id, the metadata) and what ``fork``
   writes (``parent_id`` and ``fork_seq`` together, the child's ``session/forked`` event);
2. the rows are loaded as ``open`` loads them (:class:`LogLoader`: the hash chain, decoding,
   the surface, the turn and step structure);
3. every event is then committed again, with its stored time, to a scratch session of the same
   store's types and limits: ``Session.append`` itself checks payload, size, envelope, surface,
   time and structure. An extension event of a type this store does not know is committed as
   a free-form JSON object of an ignorable type, so its payload is held to the same limits;
4. every attachment the events reference is in the export or already in the store.

Some things an export may hold that a commit would not have written are kept, because the
chain binds them and nothing reads them wrongly: they are returned as :class:`Departure` s for
the caller to report. A time earlier than the event before (``append`` never stamps one, but
takes one given explicitly), and a ``parent_id`` naming a session the store does not hold.
"""

from __future__ import annotations

import itertools
from collections.abc import Container, Mapping, Sequence
from typing import Any

import msgspec

from .._attachments import referenced_digests
from .._codec import Row, decode_surface
from .._errors import (
    AttachmentNotFoundError,
    EventLogError,
    ImportRefusedError,
    SessionNotFoundError,
    SurfaceError,
    UnknownEventTypeError,
)
from .._event import Event, Unknown
from .._ids import validate_session_id
from .._session import Session
from .._session_ports import SessionPorts
from .._strict import INT64_MAX, check_int
from .._vocabulary import SessionForked
from ._args import checked_metadata
from ._attachment_reads import checked_attachment
from ._base import SessionRecord
from ._loader import LogLoader
from ._logstore import LogStore

__all__ = ("Departure", "check_import")

_sources_decoder = msgspec.json.Decoder(tuple[int, ...])
_object_decoder = msgspec.json.Decoder(dict[str, Any])


class Departure(msgspec.Struct, frozen=True, kw_only=True):
    """Something an imported session holds that a commit would not have written, imported as
    it is (see :func:`check_import`).

    :ivar session_id: the session (under the id it was exported with).
    :ivar seq: the event, or ``None`` for the session's record.
    :ivar field: the column or record field (``time``, ``parent_id``, ``fork_seq``).
    :ivar reason: what departs, in words.
    """

    session_id: str
    seq: int | None
    field: str
    reason: str


async def check_import(
    store: LogStore,
    record: SessionRecord,
    rows: Sequence[Row],
    attachments: Mapping[str, bytes] | None = None,
    *,
    parents: Container[str] = (),
) -> tuple[Departure, ...]:
    """Check a session to import into ``store`` (its ``record`` and stored ``rows``, as
    :meth:`LogStore.restore` takes them) against the rules a commit is held to; write nothing.

    :param attachments: the attachment bytes that come with it, by digest (checked against
        their digests by the caller).
    :param parents: ids of sessions imported with it, which a ``parent_id`` may name.
    :returns: the departures the session is imported with (empty: it is exactly what commits
        would have written).
    :raises ImportRefusedError: naming the session, the seq (``None`` for the record) and the
        field at fault; nothing may be imported.
    """
    _check_record(store, record, len(rows))
    events = _check_rows(store, record.id, rows)
    _check_fork(record, events)
    departures = _backwards_times(record.id, events)
    departures += await _parent(store, record, parents)
    await _check_attachments(store, record.id, events, attachments or {})
    return tuple(departures)


def _refused(sid: str, seq: int | None, field: str, why: str | EventLogError) -> ImportRefusedError:
    hint = why.hint if isinstance(why, EventLogError) else None
    if hint is not None and "salvage" in hint:
        hint = None  # advice for a stored log; nothing of this one is stored
    text = why.message if isinstance(why, EventLogError) else why
    where = f"session {sid!r}" if seq is None else f"session {sid!r}, seq {seq}"
    if isinstance(why, EventLogError) and text.startswith("session "):
        where = ""  # the library's message names the session and seq itself
    message = f"field `{field}`: {where + ': ' if where else ''}{text}"
    return ImportRefusedError(message, field=field, session_id=sid, seq=seq, hint=hint)


# -- the record ------------------------------------------------------------------------------


def _check_record(store: LogStore, record: SessionRecord, count: int) -> None:
    sid = record.id
    try:
        validate_session_id(sid)
    except EventLogError as exc:
        raise _refused(str(sid), None, "id", exc) from None
    if not check_int(record.created_at, 0, INT64_MAX):
        why = f"created_at {record.created_at!r} is not epoch milliseconds"
        raise _refused(sid, None, "created_at", why)
    try:
        checked_metadata(record.metadata, store.max_nesting)  # what ``create`` takes
    except EventLogError as exc:
        raise _refused(sid, None, "metadata", exc) from None
    if record.head != count - 1:
        why = f"head {record.head!r} but {count} event{'' if count == 1 else 's'}"
        raise _refused(sid, None, "head", why)
    if (record.parent_id is None) != (record.fork_seq is None):
        field = "fork_seq" if record.parent_id is not None else "parent_id"
        raise _refused(sid, None, field, "parent_id and fork_seq are set together (a fork)")
    if record.parent_id is not None:
        try:
            validate_session_id(record.parent_id)
        except EventLogError as exc:
            raise _refused(sid, None, "parent_id", exc) from None


def _check_fork(record: SessionRecord, events: list[Event]) -> None:
    """A fork's record and its ``session/forked`` event agree (``fork`` writes both)."""
    boundary = record.fork_seq
    if boundary is None:
        return
    forked = events[boundary + 1] if check_int(boundary, 0, len(events) - 2) else None
    expected = SessionForked(parent=record.parent_id or "", boundary=boundary)
    if forked is None or forked.type != "session/forked" or forked.data != expected:
        why = (
            f"fork_seq {boundary!r} of parent {record.parent_id!r}: the event after it is not "
            "the session/forked event a fork writes"
        )
        raise _refused(record.id, None, "fork_seq", why)


async def _parent(
    store: LogStore, record: SessionRecord, parents: Container[str]
) -> list[Departure]:
    parent = record.parent_id
    if parent is None or parent in parents:
        return []
    try:
        stored = await store.record(parent)
    except SessionNotFoundError:
        why = f"the parent session {parent!r} is not in the store (imported without it)"
        return [Departure(session_id=record.id, seq=None, field="parent_id", reason=why)]
    if record.fork_seq is not None and record.fork_seq > stored.head:
        why = (
            f"fork_seq {record.fork_seq} is past the head ({stored.head}) of the parent "
            f"{parent!r} in the store: it is not the session this one was forked from"
        )
        return [Departure(session_id=record.id, seq=None, field="fork_seq", reason=why)]
    return []


# -- the rows --------------------------------------------------------------------------------


def _check_rows(store: LogStore, sid: str, rows: Sequence[Row]) -> list[Event]:
    """Load ``rows`` as ``open`` does, then commit each again to a scratch session."""
    for row in rows:
        _check_columns(sid, row)
    loader = LogLoader(store.types, sid)
    try:
        loader.feed(rows)
    except RecursionError:  # deeper than a fresh stack decodes: far past any nesting limit
        why = "the payload nests deeper than any payload may"
        raise _refused(sid, len(loader.events), "data", why) from None
    except EventLogError as exc:
        seq = exc.seq if exc.seq is not None else len(loader.events)
        raise _refused(sid, seq, _loader_field(exc), exc) from None
    if loader.misfit is not None:
        seq, why = loader.misfit
        raise _refused(sid, seq, _misfit_field(why), why)
    scratch = _scratch(store, sid)
    for row, event in zip(rows, loader.events, strict=True):
        _recommit(scratch, sid, row, event, store.max_event_bytes)
    return loader.events


def _check_columns(sid: str, row: Row) -> None:
    """The envelope columns parse (a loader would call a bad one a payload that does not
    decode)."""
    try:
        decode_surface(row.surface)
    except ValueError:
        raise _refused(sid, row.seq, "surface", f"{row.surface!r} is not a surface") from None
    try:
        _sources_decoder.decode(row.sources)
    except (msgspec.DecodeError, RecursionError):
        why = f"{row.sources[:80]!r} is not a list of seqs"
        raise _refused(sid, row.seq, "sources", why) from None


def _loader_field(exc: EventLogError) -> str:
    text = exc.message
    if "surface operation" in text:
        return "surface"
    if "hash" in text:
        return "hash"
    if "does not decode" in text:
        return "data"
    return "type"  # an unknown type not written as ignorable, or written by a newer version


class _Scratch:
    """The tail of a scratch session: takes every commit and keeps nothing."""

    durable = -1
    last_hash = b""
    fault = None

    def check_room(self, seq: int, nbytes: int, waiting: int = 0) -> None:
        return None

    def enqueue(self, event: Event, data: bytes) -> None:
        return None

    async def flush(self, target: int) -> None:
        return None

    def forget(self) -> None:
        return None


def _scratch(store: LogStore, sid: str) -> Session:
    return Session(
        id=sid,
        types=store.types.copy(),  # extension types are added to the copy only
        ports=SessionPorts(
            tail=_Scratch(), max_event_bytes=store.max_event_bytes, max_nesting=store.max_nesting
        ),
    )


def _recommit(scratch: Session, sid: str, row: Row, event: Event, limit: int) -> None:
    data: Any = event.data
    if isinstance(data, Unknown):
        data = _extension_payload(scratch, sid, event)
    if len(row.data) > limit:
        # The bytes are stored as exported: they, not a re-encoding, must fit.
        why = f"payload of {event.type!r} is {len(row.data)} bytes, over the limit of {limit}"
        raise _refused(sid, event.seq, "data", why)
    try:
        again = scratch.append(
            event.type, data, surface=event.surface, sources=event.sources, time=event.time
        )
    except EventLogError as exc:
        raise _refused(sid, event.seq, _append_field(exc), exc) from None
    if again.ignorable != event.ignorable:
        why = f"{event.ignorable}, but events of type {event.type!r} are {again.ignorable}"
        raise _refused(sid, event.seq, "ignorable", why)


def _extension_payload(scratch: Session, sid: str, event: Event) -> dict[str, Any]:
    """An extension event's payload as a JSON object of an ignorable type registered on the
    scratch session only, so ``append`` holds it to the limits of any payload."""
    assert isinstance(event.data, Unknown)
    if event.type not in scratch.types:
        try:
            scratch.types.register(event.type, dict[str, Any], ignorable=True)
        except EventLogError as exc:
            raise _refused(sid, event.seq, "type", exc) from None
    try:
        return _object_decoder.decode(event.data.raw)
    except RecursionError:
        why = "the payload nests deeper than any payload may"
        raise _refused(sid, event.seq, "data", why) from None
    except msgspec.DecodeError as exc:
        # A commit writes an object (a Struct or a dict); a number past a float's range, too.
        raise _refused(sid, event.seq, "data", f"does not decode as an object: {exc}") from None


#: How ``append``'s envelope errors about the surface operation read.
_SURFACE_PHRASES = (
    "surface must be",
    "Replace start and end",
    "needs a surface operation",
    "take a surface operation",
)


def _append_field(exc: EventLogError) -> str:
    """The column a refused commit is about, from ``append``'s own error."""
    text = exc.message
    if isinstance(exc, SurfaceError) or any(phrase in text for phrase in _SURFACE_PHRASES):
        return "surface"
    if isinstance(exc, UnknownEventTypeError):
        return "type"
    if "is not epoch milliseconds" in text:
        return "time"
    if ": source" in text:
        return "sources"
    if exc.hint is not None and exc.hint.startswith("turns count"):
        return _misfit_field(text)
    return "data"


def _misfit_field(why: str) -> str:
    """A structural misfit is about the event's type (a turn or step out of place), or about
    its payload when a message carries the wrong role."""
    return "data" if "carries a" in why else "type"


def _backwards_times(sid: str, events: list[Event]) -> list[Departure]:
    found = []
    for before, event in itertools.pairwise(events):
        if event.time < before.time:
            why = (
                f"{event.time} is earlier than the time of seq {before.seq} ({before.time}); "
                "a commit never stamps one"
            )
            found.append(Departure(session_id=sid, seq=event.seq, field="time", reason=why))
    return found


async def _check_attachments(
    store: LogStore, sid: str, events: list[Event], attachments: Mapping[str, bytes]
) -> None:
    seen: set[str] = set()
    for event in events:
        for digest in referenced_digests(event.data):
            if digest in seen or digest in attachments:
                continue
            try:
                await checked_attachment(store.backend, digest, session_id=sid, seq=event.seq)
            except AttachmentNotFoundError:
                why = f"attachment {digest}: neither the export nor the store holds its bytes"
                raise _refused(sid, event.seq, "attachment", why) from None
            except EventLogError as exc:  # the store holds it, altered
                raise _refused(sid, event.seq, "attachment", exc) from None
            seen.add(digest)
