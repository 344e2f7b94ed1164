"""Which projection states a snapshot carries is passed to the store (``open_store(url,
snapshot_states=...)``), never registered: by default the projections' own, so an app that
opens a store with ``open_store(url)`` and reads ``projections.timeline(session)`` opens from a
snapshot with its timeline there; an explicit tuple of codecs is what that store carries, and
two stores of one process may carry different ones (docs/stores.md, "Snapshots")."""

from __future__ import annotations

import msgspec
import pytest

from eventlog import (
    CachedState,
    EventNotLoadedError,
    SnapshotState,
    ValidationError,
    open_store,
)
from eventlog.stores import DEFAULT_SNAPSHOT_STATES, LogStore, MemoryData
from eventlog.stores._snapshots import decode_snapshot
from projections import SNAPSHOT_STATES, timeline
from projections.base import catch_up, fold
from tests.test_live_trim import CountTypes
from tests.test_snapshots import TurnPlan, play, state_of
from tests.three_stores import Opener, stores

__all__ = ("stores",)

pytestmark = pytest.mark.anyio

#: Three turns, a compaction after the third: its flush writes a snapshot.
PLANS = [TurnPlan(calls=(1,), header=True, queued=False, compact=turn == 3) for turn in (1, 2, 3)]


COUNTS = CountTypes()
COUNTS_CODEC = SnapshotState(
    key=COUNTS.key,
    version=1,
    encode=msgspec.json.encode,
    decode=lambda data: msgspec.json.decode(data, type=dict[str, int]),
    initial=COUNTS.initial,
    apply=COUNTS.apply,
)


async def snapshotted(store: LogStore) -> int:
    """Write the session of :data:`PLANS` (compacted, so snapshotted); the snapshot's seq."""
    session = await store.create(session_id="s")
    for turn, plan in enumerate(PLANS, start=1):
        play(session, turn, plan)
        await session.flush()
    await store._checkpointer.settled()
    await session.aclose()
    stored = await store.stored_snapshot("s")
    assert stored is not None
    return stored[0]


async def carried(store: LogStore) -> set[str]:
    """The keys of the states the stored snapshot holds (decoded with every codec known)."""
    stored = await store.stored_snapshot("s")
    assert stored is not None
    restored = decode_snapshot(stored[2], store.types, "s", (*SNAPSHOT_STATES, COUNTS_CODEC))
    return set(restored.states)


async def test_by_default_a_store_carries_the_projections_states(stores: Opener) -> None:
    # open_store(url) with no option: the projections' codecs, resolved from the reference.
    assert DEFAULT_SNAPSHOT_STATES == "projections:SNAPSHOT_STATES"
    async with stores() as store:
        assert store.snapshot_states == SNAPSHOT_STATES
        seq = await snapshotted(store)
        assert await carried(store) == {spec.key for spec in SNAPSHOT_STATES}
        # Opened from the snapshot, each state is there as a cached state at the snapshot's
        # seq, and the projections read what a full replay reads.
        session = await store.open("s")
        assert session.snapshot_seq == seq and session.loaded_from == seq
        for spec in SNAPSHOT_STATES:
            entry = session.projection_cache[spec.key]
            assert isinstance(entry, CachedState) and entry.next_seq == seq + 1
        live = state_of(session)
        await session.aclose()
        full = await store.open("s", keep_whole=True)
        assert state_of(full) == live
        await full.aclose()


async def test_a_store_given_no_states_carries_none_and_says_what_a_projection_needs() -> None:
    data = MemoryData()
    async with open_store("memory:", data=data, snapshot_states=()) as store:
        assert store.snapshot_states == ()
        seq = await snapshotted(store)
        assert await carried(store) == set()
        session = await store.open("s")
        assert session.snapshot_seq == seq and session.projection_cache == {}
        # The timeline has nothing to start from and the session does not hold the events
        # before the snapshot: the read says so (it never folds part of the log).
        with pytest.raises(EventNotLoadedError, match="before the session's window"):
            timeline(session)
        # Made whole, it folds the log.
        await session.load_history()
        assert timeline(session).next_turn == 4
        await session.aclose()


async def test_two_stores_of_one_process_carry_what_each_was_given(stores: Opener) -> None:
    # Nothing is registered process-wide: a store given the app's codec beside the defaults
    # carries it; a store of the same process given the defaults only does not.
    async with stores(snapshot_states=(*SNAPSHOT_STATES, COUNTS_CODEC)) as store:
        session = await store.create(session_id="s")
        catch_up(session, COUNTS)  # the app reads its projection: a cached state
        for turn, plan in enumerate(PLANS, start=1):
            play(session, turn, plan)
            await session.flush()
        await store._checkpointer.settled()
        events = list(await session.events())
        await session.aclose()
        assert await carried(store) == {*(spec.key for spec in SNAPSHOT_STATES), COUNTS.key}
        # Reopened from the snapshot, the app's state is restored and catches up from it.
        reopened = await store.open("s")
        assert reopened.loaded_from > 0
        assert catch_up(reopened, COUNTS) == fold(COUNTS, events)
        await reopened.aclose()
    async with stores() as store:
        assert COUNTS.key not in {spec.key for spec in store.snapshot_states}
        reopened = await store.open("s")
        # The stored snapshot holds the app's state, but this store was not given its codec:
        # it is not decoded, and nothing is in the cache under its key.
        assert COUNTS.key not in reopened.projection_cache
        await reopened.aclose()


async def test_a_state_the_snapshot_lacks_is_rebuilt_from_the_stored_events() -> None:
    data = MemoryData()
    async with open_store("memory:", data=data) as store:
        await snapshotted(store)  # carries the projections' states, not the app's
    async with open_store(
        "memory:", data=data.restarted(), snapshot_states=(*SNAPSHOT_STATES, COUNTS_CODEC)
    ) as store:
        session = await store.open("s")
        assert session.loaded_from > 0
        expected = fold(COUNTS, [e async for e in store.read("s", 0, session.loaded_from + 1)])
        entry = session.projection_cache[COUNTS.key]
        assert isinstance(entry, CachedState) and entry.state == expected
        assert catch_up(session, COUNTS) == fold(COUNTS, await session.events())
        await session.aclose()


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ([1], "snapshot_states holds 1, not a SnapshotState"),
        (42, "must be a sequence of SnapshotState, got 42"),
        ("projections", "is not a 'module:attribute' reference"),
        ("projections:NO_SUCH", "projections has no NO_SUCH"),
        (
            [SnapshotState("", 1, bytes, bytes, dict, lambda s, e: s)],
            "key must be a non-empty string",
        ),
        ([SnapshotState("k", -1, bytes, bytes, dict, lambda s, e: s)], "version must be an int"),
    ],
)
def test_bad_snapshot_states_are_refused_naming_what(option: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        open_store("memory:", snapshot_states=option)


def test_a_reference_to_a_module_not_installed_carries_none() -> None:
    assert open_store("memory:", snapshot_states="not_installed_here:STATES").snapshot_states == ()


def test_a_wrapped_store_keeps_the_states_it_was_given() -> None:
    store = open_store("memory:", snapshot_states=(COUNTS_CODEC,))
    options = store.options_over(lambda backend: backend)
    assert LogStore(**options).snapshot_states == (COUNTS_CODEC,)
