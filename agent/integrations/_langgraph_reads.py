"""The LangGraph saver's reads: one checkpoint (``get_tuple``), a page of ``list`` and the
``DeltaChannel`` history of a checkpoint's ancestors. Each reads only the events its answer
needs (from the store when the session does not hold them) and builds the answer from them
(:mod:`._langgraph_tuples`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple, DeltaChannelHistory, get_checkpoint_id
from langgraph.checkpoint.serde.base import SerializerProtocol

from eventlog import Event, Session

from ._langgraph_index import ThreadIndex, load, read_at
from ._langgraph_tuples import checkpoint_tuple, delta_history_of, metadata_matches

__all__ = ("PAGE", "delta_history", "read_page", "read_tuple")

#: Checkpoints materialised per page of ``list`` (and per read of an ancestor chain).
PAGE = 32


async def read_tuple(
    serde: SerializerProtocol,
    session: Session,
    index: ThreadIndex,
    thread_id: str,
    ns: str,
    checkpoint_id: str,
    config: RunnableConfig,
) -> CheckpointTuple:
    """Checkpoint ``checkpoint_id`` of ``ns`` (stored in ``index``) as ``get_tuple`` answers
    ``config``: under ``config`` itself when it names the checkpoint, else under the
    checkpoint's own config."""
    loaded = await load(serde, session, index, ns, [checkpoint_id])
    named = config if get_checkpoint_id(config) else None
    return checkpoint_tuple(serde, loaded, thread_id, ns, checkpoint_id, config=named)


async def read_page(
    serde: SerializerProtocol,
    session: Session,
    index: ThreadIndex,
    thread_id: str,
    ns: str,
    ids: Sequence[str],
    filter: dict[str, Any] | None,
) -> list[CheckpointTuple]:
    """Checkpoints ``ids`` (newest first) that match ``filter``, as ``list`` gives them: the
    metadata filter is applied before any blob is read."""
    entries = index.checkpoints[ns]
    read = await read_at(session, (entries[i][0] for i in ids))
    metadata = {i: serde.loads_typed(read[entries[i][0]].data.metadata.pair()) for i in ids}
    ids = [i for i in ids if metadata_matches(metadata[i], filter)]
    loaded = await load(serde, session, index, ns, ids, checkpoints=read)
    return [checkpoint_tuple(serde, loaded, thread_id, ns, i, metadata=metadata[i]) for i in ids]


async def delta_history(
    serde: SerializerProtocol,
    session: Session,
    index: ThreadIndex,
    ns: str,
    target: str,
    channels: Sequence[str],
) -> Mapping[str, DeltaChannelHistory]:
    """The ``DeltaChannel`` history of checkpoint ``target`` (stored in ``index``): its
    ancestors back to the nearest one holding a value of each channel, or to the root, each
    read once."""
    chain, read = await _seeded_chain(serde, session, index, ns, target, channels)
    # The ancestors' events, read once; of their blobs only the channels asked for.
    loaded = await load(serde, session, index, ns, chain, channels=channels, checkpoints=read)
    return delta_history_of(serde, loaded, chain, channels)


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
