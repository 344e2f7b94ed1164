"""Snapshots: the state ``open`` rebuilds, stored at checkpoints so ``open`` need not replay the
whole log (docs/stores.md).

A snapshot covers one seq (a durable event) and the chain hash stored at that seq. It holds the
surface (its nodes and generation, with the events on it, so the messages the model sees come
back without reading the log), the turn and step grammar, the covered event itself, and the
cached states of the projections whose codecs the store was given (``snapshot_states``).

The surface's events are held as the rows the store holds, hash left out. A capture takes them
from the session's rows cache: the rows its previous snapshot held (or the one it was opened
from), the rows the writer wrote since and those ``open`` read (:func:`keep_surface_rows`), so
it encodes a payload again only for an event it finds in none of them.

Stored bytes: ``b"ELS"``, one format byte, a 16-byte BLAKE2b digest of the body, the body
(msgpack). A snapshot that is torn, altered, of another format, or whose hash is not the stored
row's at its seq is never used: ``open`` replays instead and reports why. Only the chain is the
truth; a snapshot is a cache of it.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from .._codec import Row, decode_event, encode_sources, encode_surface
from .._errors import CorruptLogError
from .._event import Event, Unknown
from .._grammar import TurnGrammar
from .._registry import EventTypes
from .._session import Session
from .._snapshot_state import CachedState, SnapshotState
from .._surface import SurfaceIndex, message_delta
from .._versions import mark_version

__all__ = (
    "Restored",
    "SnapshotFault",
    "decode_snapshot",
    "encode_snapshot",
    "fold_state",
    "keep_surface_rows",
    "stored_snapshot",
)

logger = logging.getLogger("eventlog.snapshots")

_MAGIC = b"ELS"
#: The snapshot format this version writes and reads.
SNAPSHOT_FORMAT = 1
_DIGEST = 16


class _Body(msgspec.Struct, array_like=True, frozen=True):
    seq: int
    hash: bytes
    nodes: list[int]
    generation: int
    grammar: tuple[int | None, int | None, int, int]
    #: The covered event and the surface's events, as rows (hash left empty), ascending.
    rows: list[Row]
    #: Projection key -> (codec version, encoded state).
    states: dict[str, tuple[int, bytes]]


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(_Body)


class SnapshotFault(Exception):
    """Why stored snapshot bytes cannot be used (the message says)."""


@dataclass
class Restored:
    """A decoded snapshot, ready for :meth:`LogLoader.resume`."""

    seq: int
    hash: bytes
    head: Event
    surface: SurfaceIndex
    grammar: TurnGrammar
    pinned: dict[int, Event]
    #: Projection key -> decoded state (only those whose codec version matched).
    states: dict[str, object]
    #: The snapshot's rows by seq (the surface's events and the covered one): the rows cache
    #: of the session opened from it (see :func:`encode_snapshot`).
    rows: dict[int, Row]


def stored_snapshot(
    session_id: str, seq: object, hash: object, data: object
) -> tuple[int, bytes, bytes]:
    """A backend's snapshot row as ``(seq, hash, data)``, its shape checked (its bytes are
    checked where they are used, by :func:`decode_snapshot` and against the chain).

    :raises CorruptLogError: a value is not of its column's type: the row, or the table, was
        written by another application (a table of that name with other column types).
    """
    if type(seq) is not int or type(hash) is not bytes or type(data) is not bytes:
        raise CorruptLogError(
            f"session {session_id!r}: the stored snapshot row is not eventlog's (seq, hash, "
            f"data are {type(seq).__name__}, {type(hash).__name__}, {type(data).__name__}; "
            "expected int, bytes, bytes)",
            session_id=session_id,
            hint="the snapshots table was written outside eventlog; deleting the row is safe "
            "(a snapshot is a cache of the log: open replays without it)",
        )
    return seq, hash, data


def _row(event: Event, types: EventTypes) -> Row:
    data = event.data
    if isinstance(data, Unknown):
        raw = data.raw
    else:
        info = types.get(event.type)
        raw = msgspec.json.encode(data)
        if info is not None:
            raw = mark_version(raw, info.version)
    return Row(
        event.seq,
        event.type,
        event.time,
        encode_surface(event.surface),
        encode_sources(event.sources),
        event.ignorable,
        raw,
        b"",
    )


def fold_state(session: Session, spec: SnapshotState) -> object | None:
    """The state of ``spec``'s projection at ``session.head``, brought up to date in the
    session's cache (as :func:`projections.base.catch_up` keeps it: a :class:`CachedState`),
    or ``None`` when the events it would need are not in memory."""
    cache = session.projection_cache
    entry = cache.get(spec.key)
    if not isinstance(entry, CachedState):
        if session.loaded_from > 0:
            return None
        entry = cache[spec.key] = CachedState(spec.initial(), 0)
    if entry.next_seq <= session.head:
        if entry.next_seq < session.loaded_from:
            return None
        state = entry.state
        for event in session.window(entry.next_seq):
            state = spec.apply(state, event)
        entry.state, entry.next_seq = state, session.head + 1
    result: object = entry.state
    return result


#: Rows kept beyond the surface before :func:`keep_surface_rows` drops those no longer on it
#: (events a compaction replaced while no snapshot was taken).
_SLACK = 256


def keep_surface_rows(cache: dict[int, Row], rows: Sequence[Row], surface: SurfaceIndex) -> None:
    """Keep the surface events among ``rows``, a session's rows just written (hash and all),
    in its rows cache for its next snapshot, which then encodes none of their payloads again:
    the stored bytes are the bytes a snapshot holds.

    Events a later compaction took off the surface are dropped at the next snapshot, or here
    once the cache outgrows the surface (a snapshot may not be taken for a while), so the
    cache holds about the surface's rows, as a snapshot does.
    """
    for row in rows:
        if row.surface is not None:
            cache[row.seq] = row
    nodes = surface.nodes
    if len(cache) > 2 * len(nodes) + _SLACK:
        on = set(nodes)
        for seq in [seq for seq in cache if seq not in on]:
            del cache[seq]


def encode_snapshot(
    session: Session,
    rows_cache: dict[int, Row] | None = None,
    states: tuple[SnapshotState, ...] = (),
) -> tuple[int, bytes, bytes]:
    """``(seq, hash, bytes)`` of a snapshot of ``session`` at its head (which must be durable
    and its hash known: ``session.last_hash``).

    :param rows_cache: rows of this session's events by seq: those of its previous snapshot
        (or of the snapshot it was opened from) and those :func:`keep_surface_rows` kept as
        they were written. Reused (events never change; a row's stored hash is left out of
        the snapshot, as every row's is) and updated to this snapshot's rows, so a snapshot
        encodes only the payloads of surface events it finds in neither.
    :param states: the projection states it carries (each brought up to the head).
    """
    head = session.head
    surface = session.surface_index
    types = session.types
    seqs = sorted({*surface.nodes, head})
    cache = rows_cache if rows_cache is not None else {}
    rows = []
    for seq in seqs:
        row = cache.get(seq)
        if row is None:
            row = _row(session._held(seq), types)
        elif row.hash:
            row = msgspec.structs.replace(row, hash=b"")  # as written: the stored hash
        rows.append(row)
    cache.clear()
    cache.update(zip(seqs, rows, strict=True))
    encoded: dict[str, tuple[int, bytes]] = {}
    for spec in states:
        try:
            state = fold_state(session, spec)
            if state is not None:
                encoded[spec.key] = (spec.version, spec.encode(state))
        except Exception:  # one projection's codec failing must not cost the others
            logger.exception("eventlog: snapshot of %r: state %r not encoded", session.id, spec.key)
    grammar = session.grammar
    body = _encoder.encode(
        _Body(
            seq=head,
            hash=session.last_hash,
            nodes=list(surface.nodes),
            generation=surface.generation,
            grammar=(grammar.turn, grammar.step, grammar.last_turn, grammar.last_step),
            rows=rows,
            states=encoded,
        )
    )
    digest = hashlib.blake2b(body, digest_size=_DIGEST).digest()
    return head, session.last_hash, _MAGIC + bytes([SNAPSHOT_FORMAT]) + digest + body


def decode_snapshot(
    data: bytes, types: EventTypes, session_id: str, states: tuple[SnapshotState, ...] = ()
) -> Restored:
    """The snapshot stored as ``data``, with the projection states of ``states`` it holds.

    :raises SnapshotFault: unknown format, digest mismatch (torn or altered), undecodable
        body or events, or a surface inconsistent with its events.
    """
    if data[:3] != _MAGIC or len(data) < 4 + _DIGEST:
        raise SnapshotFault("not a snapshot (bad magic or truncated)")
    if data[3] != SNAPSHOT_FORMAT:
        raise SnapshotFault(
            f"unknown snapshot format {data[3]} (this version reads {SNAPSHOT_FORMAT})"
        )
    body = data[4 + _DIGEST :]
    if hashlib.blake2b(body, digest_size=_DIGEST).digest() != data[4 : 4 + _DIGEST]:
        raise SnapshotFault("digest mismatch (torn or altered)")
    try:
        snap = _decoder.decode(body)
    except Exception as exc:  # any failure means: do not use it
        raise SnapshotFault(f"does not decode: {type(exc).__name__}: {exc}") from exc
    rows = {row.seq: row for row in snap.rows}
    if snap.seq not in rows:
        raise SnapshotFault(f"the event it covers (seq {snap.seq}) is not among those it holds")
    try:
        pinned: dict[int, Event] = {}
        for row in snap.rows:
            pinned[row.seq] = decode_event(row, types, session_id=session_id)
        head = pinned.pop(snap.seq)
        surface = SurfaceIndex()
        for node in snap.nodes:
            event = head if node == snap.seq else pinned[node]
            surface.append_node(node, message_delta(event.data.message))
        surface.generation = snap.generation
    except Exception as exc:  # any failure means: do not use it
        raise SnapshotFault(f"does not decode: {type(exc).__name__}: {exc}") from exc
    grammar = TurnGrammar()
    grammar.turn, grammar.step, grammar.last_turn, grammar.last_step = snap.grammar
    known = {spec.key: spec for spec in states}
    decoded: dict[str, object] = {}
    for key, (version, blob) in snap.states.items():
        spec = known.get(key)
        if spec is None or spec.version != version:
            continue  # rebuilt from the events on open
        try:
            decoded[key] = spec.decode(blob)
        except Exception as exc:
            logger.warning(
                "eventlog: session %r: snapshot state %r does not decode: %s", session_id, key, exc
            )
    return Restored(
        seq=snap.seq,
        hash=snap.hash,
        head=head,
        surface=surface,
        grammar=grammar,
        pinned=pinned,
        states=decoded,
        rows=rows,
    )
