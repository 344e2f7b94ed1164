"""A snapshot holds its surface events as the rows the store holds (their hash left out), and
takes them from the rows the writer wrote or from the snapshot the session was opened from:
capturing a snapshot encodes no surface event's payload a second time (white-box: the function
that would encode one is watched)."""

from __future__ import annotations

import dataclasses
from typing import Any

import msgspec
import pytest

import eventlog.stores._snapshots as snapshots_module
from eventlog import Event, EventTypes, Session, open_store
from eventlog._codec import Row
from eventlog._surface import SurfaceIndex
from eventlog.stores._snapshots import decode_snapshot, encode_snapshot, keep_surface_rows
from tests.test_snapshots import TurnPlan, play, state_of
from tests.three_stores import Opener, stores

__all__ = ("stores",)

pytestmark = pytest.mark.anyio

#: Turns of one, two and no tool calls; the first is compacted (a snapshot needs a compaction).
PLANS = [
    TurnPlan(calls=(1, 2, 0), header=False, queued=False, compact=turn == 1)
    for turn in range(1, 13)
]
#: The surface types: their events are what a snapshot holds beside the one it covers.
SURFACE_TYPES = {"user/message", "assistant/message", "tool/result"}


@pytest.fixture
def encoded(monkeypatch: pytest.MonkeyPatch) -> list[Event]:
    """The events a snapshot capture encodes itself (instead of reusing a row)."""
    seen: list[Event] = []
    real = snapshots_module._row

    def watched(event: Event, types: EventTypes) -> Row:
        seen.append(event)
        return real(event, types)

    monkeypatch.setattr(snapshots_module, "_row", watched)
    return seen


async def flush_and_settle(store: Any, session: Session) -> None:
    """Flush, then wait for the snapshot that flush may have started to be written (one in
    flight makes the store skip the next checkpoint: the test wants every one taken)."""
    await session.flush()
    await store._checkpointer.settled()


async def stored_rows(store: Any, session_id: str) -> dict[int, Row]:
    return {
        row.seq: row
        async for chunk in store.backend.read_rows(session_id, 0, None)
        for row in chunk
    }


async def check_snapshot_is_the_stored_rows(store: Any, session_id: str) -> int:
    """Assert the stored snapshot's rows are the log's rows byte for byte, hash left out;
    return the snapshot's seq."""
    stored = await store.stored_snapshot(session_id)
    assert stored is not None
    seq, _, data = stored
    assert isinstance(seq, int)
    restored = decode_snapshot(data, store.types, session_id)
    log = await stored_rows(store, session_id)
    assert restored.rows and seq in restored.rows
    for at, row in restored.rows.items():
        assert row == msgspec.structs.replace(log[at], hash=b"")
    return seq


async def test_a_snapshot_reuses_the_written_rows_of_its_surface_events(
    stores: Opener, encoded: list[Event]
) -> None:
    # A session compacts once, then grows its surface turn after turn, flushed each time:
    # a snapshot every 30 events, each holding the whole surface.
    async with stores(snapshot_every=30) as store:
        session = await store.create(session_id="s")
        for turn, plan in enumerate(PLANS[:8], start=1):
            play(session, turn, plan)
            await flush_and_settle(store, session)
        written = state_of(session)
        await session.aclose()
    # Snapshots were taken, and each encoded at most the event it covers (a turn's end, not on
    # the surface): every surface event came from the rows the writer wrote.
    assert encoded, "no snapshot was taken"
    assert {event.type for event in encoded} == {"turn/end"}
    async with stores(snapshot_every=30) as store:
        # What was stored is the log's rows, byte for byte, and opens to the written state.
        first = await check_snapshot_is_the_stored_rows(store, "s")
        session = await store.open("s")
        assert session.snapshot_seq == first and state_of(session) == written
        # Opened from it, the session keeps growing: its next snapshots take the older surface
        # events from the snapshot it was opened from, the newer from what was written.
        encoded.clear()
        for turn, plan in enumerate(PLANS[8:], start=9):
            play(session, turn, plan)
            await flush_and_settle(store, session)
        await session.aclose()
        assert {event.type for event in encoded} == {"turn/end"}
    async with stores(snapshot_every=30) as store:
        assert await check_snapshot_is_the_stored_rows(store, "s") > first


async def test_reused_rows_give_the_bytes_a_full_encoding_gives() -> None:
    # The same session state encoded twice: from the rows kept as written, and from nothing
    # (every surface event encoded from its payload). Same snapshot, byte for byte.
    async with open_store("memory:", snapshot_every=10_000) as store:
        session: Session = await store.create(session_id="s")
        for turn, plan in enumerate(PLANS, start=1):
            play(session, turn, plan)
            await session.flush()
        kept = store._checkpointer.rows_of(session.id)
        # Every surface event is there; those after the summary (snapshotted at once) as
        # written, with their hash.
        nodes = list(session.surface_index.nodes)
        assert set(nodes) <= kept.keys() and all(kept[seq].hash for seq in nodes[1:])
        reused = encode_snapshot(session, dict(kept), store.snapshot_states)
        assert reused == encode_snapshot(session, {}, store.snapshot_states)
        await session.aclose()


async def test_a_session_that_never_compacted_keeps_no_rows() -> None:
    # No snapshot is ever taken of it before it compacts: its rows are not kept for one.
    async with open_store("memory:", snapshot_every=5) as store:
        session = await store.create(session_id="s")
        for turn, plan in enumerate(PLANS, start=1):
            play(session, turn, dataclasses.replace(plan, compact=False))
            await session.flush()
        assert store._checkpointer.rows_of(session.id) == {}
        await session.aclose()


def test_kept_rows_stay_about_the_surfaces_size() -> None:
    # A surface of three nodes; the cache holds rows of many events long replaced (no snapshot
    # was taken meanwhile to drop them).
    surface = SurfaceIndex()
    for seq in (1000, 1001, 1002):
        surface.append_node(seq, 1)

    def row(seq: int) -> Row:
        return Row(seq, "user/message", 0, "append", "[]", False, b"{}", b"h")

    cache = {seq: row(seq) for seq in range(300)}
    # Writing the surface's rows drops the others once they outnumber it (plus some slack).
    keep_surface_rows(cache, [row(1000), row(1001), row(1002)], surface)
    assert sorted(cache) == [1000, 1001, 1002]
    # Rows that are not surface events (no surface operation) are never kept.
    keep_surface_rows(cache, [msgspec.structs.replace(row(1003), surface=None)], surface)
    assert sorted(cache) == [1000, 1001, 1002]
