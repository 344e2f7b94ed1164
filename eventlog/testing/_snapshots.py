"""Conformance cases: snapshots (docs/stores.md). Opening from one equals a full replay, a
damaged one is ignored and reported, a full open still verifies the rows it covers, and they
are deleted with their session and never forked.
"""

from __future__ import annotations

import pytest

from .._errors import CorruptLogError, EventNotLoadedError, ValidationError
from .._event import Replace
from .._message import Message
from .._session import Session
from .._vocabulary import UserMessage
from ..stores import LogStore
from ._helpers import append_turn, assert_same
from ._hooks import StoreHooks

__all__ = ("SnapshotCases",)


class SnapshotCases(StoreHooks):
    """The cases of writing, opening from, damaging and deleting snapshots."""

    # -- snapshots (docs/stores.md) ------------------------------------------------------------

    async def _compacting_session(self, store: LogStore, turns: int = 12) -> Session:
        """A session of ``turns`` turns whose whole surface is replaced by a summary after
        every fourth turn (a compaction), flushed after each turn."""
        session = await store.create(session_id="long")
        for turn in range(1, turns + 1):
            append_turn(session, turn, f"turn {turn}")
            if turn % 4 == 0:
                nodes = list(session.surface_index.nodes)
                summary = UserMessage(message=Message.user(f"summary up to turn {turn}"))
                session.append(
                    "user/message", summary, surface=Replace(nodes[0], nodes[-1]), sources=nodes
                )
            await session.flush()
        return session

    async def test_open_from_a_snapshot_equals_a_full_replay(self) -> None:
        # A compacting session, snapshotted at its compactions and every 20 events.
        async with self.make_store(snapshot_every=20) as store:
            session = await self._compacting_session(store)
            events = list(await session.events())
            expected = (session.head, session.last_hash, list(session.surface_index.nodes))
        async with self.make_store(snapshot_every=20) as store:
            resumed = await store.open("long")
            # It started from a snapshot (it holds only the events since, and the surface) ...
            assert resumed.snapshot_fault is None
            assert resumed.snapshot_seq is not None and resumed.snapshot_seq > 0
            assert resumed.loaded_from == resumed.snapshot_seq
            assert (resumed.head, resumed.last_hash, list(resumed.surface_index.nodes)) == expected
            # ... the surface's events and the later ones read as before ...
            for seq in [*resumed.surface_index.nodes, *range(resumed.loaded_from, resumed.head)]:
                assert_same([resumed.window().event(seq)], [events[seq]])
            # ... older ones are read from the store, and the window says where it starts.
            assert_same(list(await resumed.events()), events)
            assert_same([e async for e in resumed.read_events(0)], events)
            with pytest.raises(EventNotLoadedError, match=r"session 'long', seq 0: before the"):
                resumed.window(0)
            # It goes on writing where it stopped, and a full replay agrees with it.
            append_turn(resumed, 13)
            await resumed.flush()
            after = (resumed.head, resumed.last_hash, list(resumed.surface_index.nodes))
            await resumed.aclose()
            full = await store.open("long", verify="full")
            assert (full.head, full.last_hash, list(full.surface_index.nodes)) == after
            assert (full.loaded_from, full.snapshot_seq) == (0, None)
            assert_same(list(await full.events())[: len(events)], events)

    async def test_a_damaged_snapshot_is_ignored_and_reported(self) -> None:
        async with self.make_store(snapshot_every=20) as store:
            session = await self._compacting_session(store)
            expected = (session.head, session.last_hash, list(session.surface_index.nodes))
        # (Closing the store waited for the snapshot writes in flight.)
        async with self.make_store(snapshot_every=20) as store:
            stored = await store.stored_snapshot("long")
            assert stored is not None
            seq, digest, data = stored
            # A torn write (the bytes cut short), a flipped byte and an unknown format: none
            # is used.
            middle = len(data) // 2
            flipped = data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1 :]
            for damaged in (data[:middle], flipped, data[:3] + b"\x09" + data[4:]):
                assert await store.store_snapshot("long", seq, digest, damaged)
                reopened = await store.open("long")
                assert reopened.snapshot_fault is not None
                assert reopened.snapshot_fault.startswith(f"snapshot at seq {seq} not used")
                assert (reopened.snapshot_seq, reopened.loaded_from) == (None, 0)
                state = (reopened.head, reopened.last_hash, list(reopened.surface_index.nodes))
                assert state == expected
                await reopened.aclose()

    async def test_a_full_open_finds_a_damaged_row_the_snapshot_covers(self) -> None:
        async with self.make_store(snapshot_every=20) as store:
            session = await self._compacting_session(store)
            await session.aclose()
        await self.tamper_event("long", 1)
        async with self.make_store(snapshot_every=20) as store:
            # The default open reads only what follows the snapshot: the damage is not seen.
            opened = await store.open("long")
            assert opened.loaded_from > 1 and 1 not in opened.pinned
            await opened.aclose()
            # A full open verifies the whole chain, and finds it.
            with pytest.raises(CorruptLogError, match=r"session 'long', seq 1: hash mismatch"):
                await store.open("long", verify="full")
            with pytest.raises(ValidationError, match='verify must be "snapshot" or "full"'):
                await store.open("long", verify="most")

    async def test_snapshots_are_deleted_with_their_session_and_not_forked(self) -> None:
        async with self.make_store(snapshot_every=20) as store:
            await self._compacting_session(store)
        async with self.make_store(snapshot_every=20) as store:
            assert await store.stored_snapshot("long") is not None
            # A fork starts without one (its chain is its own) ...
            child = await store.fork("long", 9, child_id="child")
            assert await store.stored_snapshot("child") is None
            assert child.loaded_from == 0
            await child.aclose()
            # ... and a delete takes the parent's with it.
            await store.delete("long")
            assert await store.stored_snapshot("long") is None
            # Snapshots off: none is written.
        async with self.make_store(snapshot_every=0) as store:
            session = await self._compacting_session(store)
            await session.aclose()
            assert await store.stored_snapshot("long") is None
