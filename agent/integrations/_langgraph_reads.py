"""The LangGraph saver's reads that walk several checkpoints: a page of ``list`` and the
``DeltaChannel`` history of a checkpoint's ancestors. Each reads only the events its answer
needs (from the store when the session does not hold them) into a scratch ``InMemorySaver``
whose own readers give the answer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple, DeltaChannelHistory
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.base import SerializerProtocol

from eventlog import Event, Session

from ._langgraph_index import ThreadIndex, fill, read_at

__all__ = ("PAGE", "delta_history", "read_page")

#: Checkpoints materialised per page of ``list`` (and per read of an ancestor chain).
PAGE = 32


async def read_page(
    serde: SerializerProtocol,
    session: Session,
    index: ThreadIndex,
    thread_id: str,
    ns: str,
    ids: Sequence[str],
    filter: dict[str, Any] | None,
) -> list[CheckpointTuple]:
    """Checkpoints ``ids`` (newest first) that match ``filter``, as ``InMemorySaver.list``
    gives them: the metadata filter is applied before any blob is read."""
    entries = index.checkpoints[ns]
    read = await read_at(session, (entries[i][0] for i in ids))
    if filter:
        loads = serde.loads_typed
        ids = [
            i
            for i in ids
            for metadata in (loads(read[entries[i][0]].data.metadata.pair()),)
            if all(value == metadata.get(key) for key, value in filter.items())
        ]
    scratch = InMemorySaver(serde=serde)
    await fill(scratch, session, index, thread_id, ns, ids, checkpoints=read)
    scope: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}
    return list(scratch.list(scope, filter=filter))


async def delta_history(
    scratch: InMemorySaver,
    session: Session,
    index: ThreadIndex,
    thread_id: str,
    ns: str,
    target: str,
    config: RunnableConfig,
    channels: Sequence[str],
) -> Mapping[str, DeltaChannelHistory]:
    """The ``DeltaChannel`` history of checkpoint ``target`` (stored in ``index``), as
    ``InMemorySaver`` answers it: its ancestors back to the nearest one holding a value of each
    channel, or to the root, each read once."""
    chain, read = await _seeded_chain(scratch.serde, session, index, ns, target, channels)
    await fill(
        scratch,
        session,
        index,
        thread_id,
        ns,
        [target, *chain],
        channels=channels,
        checkpoints=read,  # the ancestors' events, read once
    )
    pinned: RunnableConfig = {"configurable": {**config["configurable"], "checkpoint_id": target}}
    return scratch.get_delta_channel_history(config=pinned, channels=channels)


async def _seeded_chain(
    serde: SerializerProtocol,
    session: Session,
    index: ThreadIndex,
    ns: str,
    target: str,
    channels: Sequence[str],
) -> tuple[list[str], dict[int, Event]]:
    """The ancestors of ``target``, parent first, up to the first that holds a non-empty
    value of every one of ``channels`` (the ones the history walk reaches), and their
    checkpoint events as read (by seq)."""
    chain, remaining = index.chain(ns, target), set(channels)
    entries = index.checkpoints[ns]
    read: dict[int, Event] = {}
    for start in range(0, len(chain), PAGE):
        page = chain[start : start + PAGE]
        read.update(await read_at(session, (entries[i][0] for i in page)))
        for offset, checkpoint_id in enumerate(page):
            data = read[entries[checkpoint_id][0]].data
            versions = serde.loads_typed(data.checkpoint.pair()).get("channel_versions", {})
            for channel in list(remaining):
                blob = index.blobs.get((ns, channel, versions.get(channel)))
                if channel in versions and blob is not None and not blob[1]:
                    remaining.discard(channel)
            if not remaining:
                return chain[: start + offset + 1], read
    return chain, read
