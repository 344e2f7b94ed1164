"""Whether a stored snapshot may be used, and whether it matches the log.

A snapshot's own digest only tells a torn write from a whole one: anyone who edits a snapshot
can recompute it. What binds a snapshot to the log is the hash chain. Every event a snapshot
holds (the covered event and each event on the surface: every message the model is shown) is
held as its stored row, so its chain hash can be computed again from the stored hash of the
event before it, and must be the stored hash of the event itself. Forging one would take a
second preimage of BLAKE2b; editing the log to match breaks the chain, which ``verify`` reads.

``open`` (:func:`usable_snapshot`) checks that binding: the stored hashes of those events and of
the events before them, in one read, O(surface) like the snapshot itself. A snapshot that fails
it is not used: ``open`` replays the log and says why (``session.snapshot_fault``). A held row
whose bytes differ from the stored row's but decode to the same event (a row encoded again from
its event, e.g. one upcast on read, by a snapshot of an earlier version) is not a forgery: the
stored row is read to tell the two apart.

What a snapshot derives from the log (the surface's order, the turn grammar, the projections'
states) cannot be checked without reading the log up to it. :func:`verify_snapshot` does that
(``Store.verify_snapshot``, ``eventlog verify``): it rebuilds everything the snapshot holds from
the stored events and compares.
"""

from __future__ import annotations

import logging
from typing import Protocol

import msgspec

from .._codec import GENESIS_HASH, Row, chain_hash, chain_version_of, decode_event
from .._errors import CorruptLogError, EventLogError
from .._event import Event
from .._registry import EventTypes
from .._snapshot_state import SnapshotState
from ._base import Backend, SessionRecord, Snapshots
from ._loader import LogLoader
from ._snapshots import Restored, SnapshotFault, decode_snapshot

__all__ = ("usable_snapshot", "verify_snapshot")


class _Store(Protocol):
    """What :func:`verify_snapshot` reads of the ``LogStore`` that calls it with itself: the
    store module imports this one, so the store is described here rather than imported."""

    @property
    def backend(self) -> Backend: ...

    @property
    def types(self) -> EventTypes: ...

    @property
    def snapshot_states(self) -> tuple[SnapshotState, ...]: ...

    async def record(self, session_id: str) -> SessionRecord: ...


logger = logging.getLogger("eventlog.store")

_HINT = (
    "the snapshot was altered, or is stale; deleting its row is safe (a snapshot is a cache "
    "of the log: open replays without it, and the next checkpoint writes a new one)"
)


async def usable_snapshot(
    backend: Backend,
    types: EventTypes,
    sid: str,
    head: int,
    states: tuple[SnapshotState, ...] = (),
) -> tuple[Restored | None, str | None]:
    """The session's stored snapshot when it is bound to the stored chain up to ``head``:
    ``(restored, None)``; ``(None, None)`` when none is stored; ``(None, why)`` when it cannot
    be used (logged; the caller replays the whole log instead). ``backend`` stores snapshots;
    the snapshot's projection states are decoded with ``states``."""
    assert isinstance(backend, Snapshots)
    try:
        stored = await backend.read_snapshot(sid)
    except EventLogError as exc:
        return _unused(sid, f"snapshot not read: {exc}")
    if stored is None:
        return None, None
    seq, digest, data = stored
    try:
        restored = decode_snapshot(data, types, sid, states)
        _check_shape(restored, seq, digest)
        if not 0 <= seq <= head:
            raise SnapshotFault(_stale(seq))
        await _check_bound(backend, types, sid, restored)
    except (SnapshotFault, EventLogError) as exc:
        return _unused(sid, f"snapshot at seq {seq} not used: {exc}")
    return restored, None


def _unused(sid: str, fault: str) -> tuple[None, str]:
    logger.warning("eventlog: session %r: %s; replaying the whole log", sid, fault)
    return None, fault


def _stale(seq: int) -> str:
    return f"its hash is not the stored event's at seq {seq} (stale or altered)"


def _check_shape(restored: Restored, seq: int, digest: bytes) -> None:
    """The snapshot's parts agree with each other: its header with its body, its surface with
    the events it holds (each node one of them, once, each with a surface operation).

    :raises SnapshotFault: they do not.
    """
    if restored.seq != seq or restored.hash != digest:
        raise SnapshotFault("its header does not match its body")
    nodes = restored.surface.nodes
    # Not in seq order: a compaction's event stands where the span it replaced stood.
    if len(set(nodes)) != len(nodes) or any(not 0 <= node <= seq for node in nodes):
        raise SnapshotFault("its surface names an event twice, or one outside 0..its seq")
    if set(restored.rows) != {*nodes, seq}:
        raise SnapshotFault("the events it holds are not its surface's and its own")
    if any(restored.rows[node].surface is None for node in nodes):
        raise SnapshotFault("a surface node it holds has no surface operation")
    # The order its events' own operations allow: an appended event went after everything
    # then on the surface, so each node after it is a later event (a replace stands where its
    # span stood, before newer ones perhaps). Two messages swapped do not pass.
    newest_append = -1
    for node in nodes:
        if node <= newest_append:
            later = f"event {newest_append}, which was appended later"
            raise SnapshotFault(f"its surface puts event {node} after {later}")
        if restored.rows[node].surface == "append":
            newest_append = node


async def _check_bound(backend: Backend, types: EventTypes, sid: str, restored: Restored) -> None:
    """Each held row chains from the stored hash of the event before it to its own stored
    hash (see the module docstring).

    :raises SnapshotFault: the covered event's hash is not the stored one, or a held event is
        not the stored event of its seq.
    """
    assert isinstance(backend, Snapshots)
    rows = restored.rows
    wanted = sorted({s for seq in rows for s in (seq - 1, seq) if s >= 0})
    stored = await backend.read_hashes(sid, wanted)
    if stored.get(restored.seq) != restored.hash:
        raise SnapshotFault(_stale(restored.seq))
    for seq, row in list(rows.items()):
        digest, prev = stored.get(seq), GENESIS_HASH if seq == 0 else stored.get(seq - 1)
        if digest is None or prev is None:
            raise SnapshotFault(f"its event at seq {seq} is not stored (stale or altered)")
        if _hash(row, prev, sid, digest) != digest:
            held = restored.head if seq == restored.seq else restored.pinned[seq]
            # The stored row's bytes from now on: the next snapshot holds them, and binds at
            # once (the session's rows cache starts from these rows).
            rows[seq] = await _same_as_stored(backend, types, sid, held, prev, digest)


def _hash(row: Row, prev: bytes, sid: str, digest: bytes) -> bytes:
    bound = sid if chain_version_of(digest) == 2 else None
    return chain_hash(
        prev, row.seq, row.type, row.time, row.surface, row.sources, row.ignorable, row.data, bound
    )


async def _same_as_stored(
    backend: Backend, types: EventTypes, sid: str, held: Event, prev: bytes, digest: bytes
) -> Row:
    """A held row whose bytes are not the stored row's: the same event encoded again, or not.
    Returns the stored row, its hash left out (as a snapshot holds rows).

    :raises SnapshotFault: the stored row does not chain (the log is damaged there: the replay
        says so) or decodes to another event than the one held.
    """
    row = None
    async for chunk in backend.read_rows(sid, held.seq, 1):
        row = chunk[0]
    if row is None or _hash(row, prev, sid, digest) != digest:
        raise SnapshotFault(f"the stored event at seq {held.seq} does not verify")
    if decode_event(row, types, session_id=sid) != held:
        raise SnapshotFault(f"its event at seq {held.seq} is not the stored one (altered)")
    return msgspec.structs.replace(row, hash=b"")


# -- the full check ----------------------------------------------------------------------------


async def verify_snapshot(store: _Store, sid: str) -> int | None:
    """See :meth:`~eventlog.Store.verify_snapshot`."""
    await store.record(sid)  # raises SessionNotFoundError
    backend = store.backend
    if not isinstance(backend, Snapshots):
        return None
    stored = await backend.read_snapshot(sid)
    if stored is None:
        return None
    seq, digest, data = stored
    try:
        restored = decode_snapshot(data, store.types, sid, store.snapshot_states)
        _check_shape(restored, seq, digest)
    except SnapshotFault as exc:
        raise _fault(sid, seq, str(exc)) from None
    # The log up to the snapshot, verified, keeping the rows of the events the snapshot holds.
    loader = LogLoader(store.types, sid)
    rows: dict[int, Row] = {}
    async for chunk in backend.read_rows(sid, 0, seq + 1):
        loader.feed(chunk)
        rows.update((row.seq, row) for row in chunk if row.seq in restored.rows)
    if loader.head != seq or loader.last_hash != restored.hash:
        raise _fault(sid, seq, _stale(seq))
    for at, held in restored.rows.items():
        if _differs(held, rows[at], loader.events[at], restored):
            raise _fault(sid, seq, f"its event at seq {at} is not the stored one (altered)")
    _compare_derived(sid, seq, restored, loader, store.snapshot_states)
    return seq


def _differs(held: Row, stored: Row, event: Event, restored: Restored) -> bool:
    """Whether a held row is another event than the stored one (bytes encoded again from the
    same event are not)."""
    same_bytes = (held.type, held.time, held.surface, held.sources, held.ignorable, held.data) == (
        stored.type,
        stored.time,
        stored.surface,
        stored.sources,
        stored.ignorable,
        stored.data,
    )
    if same_bytes:
        return False
    decoded = restored.head if held.seq == restored.seq else restored.pinned[held.seq]
    return decoded != event


def _compare_derived(
    sid: str, seq: int, restored: Restored, loader: LogLoader, states: tuple[SnapshotState, ...]
) -> None:
    """The surface, grammar and projection states the snapshot holds are those of the log.

    :raises CorruptLogError: one differs (named).
    """
    surface, grammar = loader.surface, loader.grammar
    if list(restored.surface.nodes) != list(surface.nodes):
        raise _fault(sid, seq, "its surface is not the log's")
    if restored.surface.generation != surface.generation:
        raise _fault(sid, seq, "its surface generation is not the log's")
    held = restored.grammar
    if (held.turn, held.step, held.last_turn, held.last_step) != (
        grammar.turn,
        grammar.step,
        grammar.last_turn,
        grammar.last_step,
    ):
        raise _fault(sid, seq, "its turn and step state is not the log's")
    for spec in states:
        state = restored.states.get(spec.key)
        if state is not None and _canonical(spec, state) != _folded(spec, loader):
            raise _fault(sid, seq, f"its {spec.key!r} state is not the log's")


def _canonical(spec: SnapshotState, state: object) -> bytes:
    # Through the codec once more, so both sides are in the form a snapshot restores.
    return spec.encode(spec.decode(spec.encode(state)))


def _folded(spec: SnapshotState, loader: LogLoader) -> bytes:
    state = spec.initial()
    for event in loader.events:
        state = spec.apply(state, event)
    return _canonical(spec, state)


def _fault(sid: str, seq: int, why: str) -> CorruptLogError:
    return CorruptLogError(
        f"session {sid!r}: the snapshot at seq {seq} does not match the log: {why}",
        session_id=sid,
        seq=seq,
        hint=_HINT,
    )
