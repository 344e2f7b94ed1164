"""The LangGraph saver's answers, built from values read from the log (:class:`Loaded`).

Pure functions over LangGraph's public API (``CheckpointTuple``, ``DeltaChannelHistory``,
``writes_sort_key``, the saver's ``serde``): no LangGraph saver's storage is driven or read,
so a LangGraph release that reorganises its own savers' internals changes nothing here. The
answers are the ones LangGraph's reference saver (``InMemorySaver``) gives for the same calls;
the conformance suite holds the saver to that.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    Checkpoint,
    CheckpointTuple,
    DeltaChannelHistory,
    PendingWrite,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from ._langgraph_events import Typed
from ._langgraph_index import Loaded

__all__ = ("checkpoint_tuple", "delta_history_of", "metadata_matches", "next_version")


def checkpoint_tuple(
    serde: SerializerProtocol,
    loaded: Loaded,
    thread_id: str,
    ns: str,
    checkpoint_id: str,
    *,
    config: RunnableConfig | None = None,
    metadata: Any = None,
) -> CheckpointTuple:
    """Checkpoint ``checkpoint_id`` of ``loaded`` as a ``CheckpointTuple``: its channel values
    (the non-empty blobs of the versions it names), its metadata (``metadata`` when already
    decoded) and its pending writes in LangGraph's order (``writes_sort_key``).

    ``config`` is the tuple's config when given (``get_tuple`` answers a config naming a
    checkpoint with that config itself), else the checkpoint's own.

    :raises KeyError: the checkpoint names no ``channel_versions`` (as LangGraph's savers do).
    """
    data, decoded = loaded.checkpoints[checkpoint_id]
    if metadata is None:
        metadata = serde.loads_typed(data.metadata.pair())
    checkpoint: Checkpoint = {
        **decoded,  # type: ignore[typeddict-item]
        "channel_values": _values(serde, loaded, decoded["channel_versions"]),
    }
    return CheckpointTuple(
        config=config if config is not None else _config(thread_id, ns, checkpoint_id),
        checkpoint=checkpoint,
        metadata=metadata,
        parent_config=_config(thread_id, ns, data.parent) if data.parent else None,
        pending_writes=[
            (task_id, channel, serde.loads_typed(value.pair()))
            for task_id, channel, value, _ in _ordered_writes(loaded, checkpoint_id)
        ],
    )


def metadata_matches(metadata: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """``list``'s metadata filter: every key of ``filter`` holds an equal value."""
    return not filter or all(value == metadata.get(key) for key, value in filter.items())


def delta_history_of(
    serde: SerializerProtocol, loaded: Loaded, chain: Sequence[str], channels: Sequence[str]
) -> dict[str, DeltaChannelHistory]:
    """The ``DeltaChannel`` history of the checkpoint whose ancestors (parent first, as far
    as the walk needs them) are ``chain``, all in ``loaded``.

    Each channel ends at the nearest ancestor holding a non-empty value of it (its ``seed``),
    or at the root; its ``writes`` are those stored under the ancestors walked, that
    ancestor's included, oldest first and in ``writes_sort_key`` order within one.
    """
    if not channels:
        return {}
    collected: dict[str, list[PendingWrite]] = {channel: [] for channel in channels}
    seeds: dict[str, Any] = {}
    remaining = set(channels)
    for checkpoint_id in chain:
        if not remaining:
            break
        versions = loaded.checkpoints[checkpoint_id][1].get("channel_versions", {})
        found: dict[str, Any] = {}
        for channel in remaining:
            version = versions.get(channel)
            blob = None if version is None else loaded.blobs.get((channel, version))
            if blob is not None and blob.type != "empty":
                found[channel] = serde.loads_typed(blob.pair())
        # Newest first here, reversed once at the end: the walk goes from the target back.
        for task_id, channel, value, _ in reversed(_ordered_writes(loaded, checkpoint_id)):
            if channel in remaining:
                collected[channel].append((task_id, channel, serde.loads_typed(value.pair())))
        seeds.update(found)
        remaining.difference_update(found)
    history: dict[str, DeltaChannelHistory] = {}
    for channel in channels:
        entry: DeltaChannelHistory = {"writes": list(reversed(collected[channel]))}
        if channel in seeds:
            entry["seed"] = seeds[channel]
        history[channel] = entry
    return history


def next_version(current: str | int | None) -> str:
    """The channel version after ``current``: a sortable string, its integer part one more
    than ``current``'s and a random fraction (the versions LangGraph's reference saver makes,
    so threads written by either read the same).

    :raises ValueError: a string ``current`` whose integer part is no integer.
    :raises AttributeError: ``current`` is neither ``None``, an int nor a string.
    """
    if current is None:
        current_v = 0
    elif isinstance(current, int):
        current_v = current
    else:
        current_v = int(current.split(".")[0])
    return f"{current_v + 1:032}.{random.random():016}"


def _config(thread_id: str, ns: str, checkpoint_id: str | None) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }


def _values(
    serde: SerializerProtocol, loaded: Loaded, versions: Mapping[str, Any]
) -> dict[str, Any]:
    """The channel values at ``versions``: a channel whose blob is missing or empty has none."""
    values: dict[str, Any] = {}
    for channel, version in versions.items():
        blob = loaded.blobs.get((channel, version))
        if blob is not None and blob.type != "empty":
            values[channel] = serde.loads_typed(blob.pair())
    return values


def _ordered_writes(loaded: Loaded, checkpoint_id: str) -> list[tuple[str, str, Typed, str]]:
    """The writes pending against ``checkpoint_id``, in the order a super-step applies them."""
    stored = loaded.writes.get(checkpoint_id, {})
    return [stored[key] for key in sorted(stored, key=lambda k: writes_sort_key(stored[k][3], *k))]
