"""Where a LangGraph thread's checkpoints, channel values and writes are in its log.

The saver answers reads from a :class:`ThreadIndex` folded from the thread's events: seqs, not
values. Whatever a read needs (a checkpoint, the blobs of the channel versions it names, the
writes pending against it) is read from the session when asked, from memory for the events it
holds and from the store for older ones (``Session.read_events``), into a :class:`Loaded`
from which the answer is built. So a thread holds in memory a few ints per checkpoint, not
every value it ever stored (with ``add_messages`` each checkpoint stores the whole history).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from eventlog import Event, EventNotLoadedError, Session

from ._langgraph_events import Checkpointed, Typed, WritesPut
from ._langgraph_ledger import ToolLedger

__all__ = ("Loaded", "ThreadIndex", "load", "read_at")

#: Two wanted seqs closer than this are read in one range (one store query, not two).
_GAP = 32


class ThreadIndex:
    """One thread's checkpoints, blobs and pending writes, by the seq of the event holding each.

    :ivar checkpoints: namespace -> checkpoint id -> ``(seq, parent id)``, namespaces in the
        order first seen (``list`` walks them so).
    :ivar blobs: ``(namespace, channel, version)`` -> ``(seq, empty)``; ``empty``: the channel
        had no value at that version.
    :ivar writes: ``(namespace, checkpoint id)`` -> ``(task id, idx)`` -> seq of the
        ``langgraph/writes`` event holding the write.
    :ivar tools: the tool calls the crash-honest tool node journalled (:class:`ToolLedger`).
    """

    __slots__ = ("blobs", "checkpoints", "tools", "writes")

    def __init__(self) -> None:
        self.checkpoints: dict[str, dict[str, tuple[int, str | None]]] = {}
        self.blobs: dict[tuple[str, str, Any], tuple[int, bool]] = {}
        self.writes: dict[tuple[str, str], dict[tuple[str, int], int]] = {}
        self.tools = ToolLedger()

    def apply(self, event: Event) -> None:
        """Fold one event of the thread's session (the one fold, on open and at commit: the
        index is a projection of the log). The tool node's events go to :attr:`tools`;
        others are ignored."""
        data = event.data
        if isinstance(data, Checkpointed):
            for blob in data.blobs:
                at = (data.ns, blob.channel, blob.version)
                self.blobs[at] = (event.seq, blob.value.type == "empty")
            self.checkpoints.setdefault(data.ns, {})[data.id] = (event.seq, data.parent)
        elif isinstance(data, WritesPut):
            stored = self.writes.setdefault((data.ns, data.checkpoint_id), {})
            for write in data.writes:
                key = (data.task_id, write.idx)
                if write.idx >= 0 and key in stored:
                    continue  # a regular write is kept once (the logged call never holds one)
                stored[key] = event.seq
        else:
            self.tools.apply(event)

    def latest(self, ns: str) -> str | None:
        """The newest checkpoint id of ``ns`` (ids sort by time), or ``None``."""
        return max(self.checkpoints.get(ns, {}), default=None)

    def chain(self, ns: str, checkpoint_id: str) -> list[str]:
        """The ancestors of ``checkpoint_id``, parent first, as far as they are stored."""
        found: list[str] = []
        entries = self.checkpoints.get(ns, {})
        entry = entries.get(checkpoint_id)
        current = entry[1] if entry is not None else None
        while current is not None and current in entries:
            found.append(current)
            current = entries[current][1]
        return found


async def read_at(session: Session, seqs: Iterable[int]) -> dict[int, Event]:
    """The events at ``seqs``, read in as few ranges as their spacing allows (from memory when
    the session holds them, else from the store).

    :raises EventNotLoadedError: the store no longer holds one of them (the thread was deleted
        meanwhile).
    """
    wanted = sorted(set(seqs))
    found: dict[int, Event] = {}
    for start, stop in _runs(wanted):
        async for event in session.read_events(start, stop - start):
            found[event.seq] = event
    missing = [seq for seq in wanted if seq not in found]
    if missing:
        raise EventNotLoadedError(
            f"session {session.id!r}, seq {missing[0]}: the store holds no such event",
            session_id=session.id,
            seq=missing[0],
        )
    return {seq: found[seq] for seq in wanted}


def _runs(seqs: Sequence[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for seq in seqs:
        if runs and seq - runs[-1][1] < _GAP:
            runs[-1] = (runs[-1][0], seq + 1)
        else:
            runs.append((seq, seq + 1))
    return runs


@dataclass(slots=True)
class Loaded:
    """The values of some checkpoints of one namespace, read from the log where the index
    says they are: what a read's answer is built from (:mod:`._langgraph_tuples`).

    :ivar checkpoints: checkpoint id -> its event's payload and its decoded checkpoint
        (without channel values, as it was logged).
    :ivar blobs: ``(channel, version)`` -> the value the index keeps for it (the last logged).
    :ivar writes: checkpoint id -> ``(task id, idx)`` -> ``(task id, channel, value, task
        path)``: the pending write the index keeps for that key.
    """

    checkpoints: dict[str, tuple[Checkpointed, dict[str, Any]]] = field(default_factory=dict)
    blobs: dict[tuple[str, Any], Typed] = field(default_factory=dict)
    writes: dict[str, dict[tuple[str, int], tuple[str, str, Typed, str]]] = field(
        default_factory=dict
    )


async def load(
    serde: SerializerProtocol,
    session: Session,
    index: ThreadIndex,
    ns: str,
    ids: Sequence[str],
    *,
    channels: Sequence[str] | None = None,
    checkpoints: dict[int, Event] | None = None,
) -> Loaded:
    """Checkpoints ``ids`` of ``ns`` (stored in ``index``), with the blobs of the channel
    versions each names (only ``channels``' when given) and the writes pending against each,
    read from ``session``: two rounds of reads (the checkpoints, then what they name).
    ``checkpoints`` holds checkpoint events already read.

    :raises EventNotLoadedError: the store no longer holds one of them (see :func:`read_at`).
    """
    entries = index.checkpoints.get(ns, {})
    read = dict(checkpoints or {})
    read.update(await read_at(session, (entries[i][0] for i in ids if entries[i][0] not in read)))
    loaded = Loaded()
    wanted: set[int] = set()
    for checkpoint_id in ids:
        data: Checkpointed = read[entries[checkpoint_id][0]].data
        decoded = serde.loads_typed(data.checkpoint.pair())
        loaded.checkpoints[checkpoint_id] = (data, decoded)
        for channel, version in decoded.get("channel_versions", {}).items():
            blob = index.blobs.get((ns, channel, version))
            if blob is not None and (channels is None or channel in channels):
                wanted.add(blob[0])
        wanted.update(index.writes.get((ns, checkpoint_id), {}).values())
    for event in (await read_at(session, wanted - read.keys())).values():
        read[event.seq] = event
    for seq in sorted(wanted):
        _take(loaded, index, read[seq])
    return loaded


def _take(loaded: Loaded, index: ThreadIndex, event: Event) -> None:
    """Put into ``loaded`` the blobs and writes of ``event`` that the index keeps there."""
    data = event.data
    if isinstance(data, Checkpointed):
        for blob in data.blobs:
            if index.blobs.get((data.ns, blob.channel, blob.version), (None,))[0] == event.seq:
                loaded.blobs[(blob.channel, blob.version)] = blob.value
    elif isinstance(data, WritesPut):
        stored = index.writes.get((data.ns, data.checkpoint_id), {})
        target = loaded.writes.setdefault(data.checkpoint_id, {})
        for write in data.writes:
            key = (data.task_id, write.idx)
            if stored.get(key) == event.seq:  # the write the index kept (the last, if special)
                target[key] = (data.task_id, write.channel, write.value, data.task_path)
