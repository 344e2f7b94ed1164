"""The order of a snapshot's surface is checked on open, as far as its own events tell it: an
appended event went after everything then on the surface, so no older event may follow it (a
compaction's event stands where the span it replaced stood, and may precede newer ones). A
forged snapshot whose messages are swapped, its digest recomputed, is not served by a default
open; before, open served the model its messages in the forged order (only ``verify`` saw it).
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import pytest

from eventlog import CorruptLogError
from eventlog.stores._snapshots import _Body
from projections import messages
from tests.test_snapshot_binding import _forge_stored, forge, write_snapshotted
from tests.test_snapshots import state_of
from tests.three_stores import Opener, stores

__all__ = ("stores",)

pytestmark = pytest.mark.anyio


def swap_last_two(body: _Body) -> _Body:
    """The surface's last two nodes (two appended messages) swapped; rows untouched."""
    nodes = list(body.nodes)
    nodes[-2], nodes[-1] = nodes[-1], nodes[-2]
    return msgspec.structs.replace(body, nodes=nodes)


def reverse_all(body: _Body) -> _Body:
    """The whole surface reversed (a compaction's event among them)."""
    return msgspec.structs.replace(body, nodes=list(reversed(body.nodes)))


@pytest.mark.parametrize("edit", [swap_last_two, reverse_all])
async def test_a_snapshot_with_its_messages_reordered_is_not_served(
    stores: Opener, edit: Callable[[_Body], _Body]
) -> None:
    # A compacted session with its genuine snapshot, which open uses.
    async with stores(snapshot_every=0) as store:
        written, seq = await write_snapshotted(store)
        session = await store.open("s")
        assert (session.snapshot_seq, session.snapshot_fault) == (seq, None)
        shown = [m.id for m in messages(session)]
        await session.aclose()
    async with stores(snapshot_every=0) as store:
        # The snapshot's surface reordered behind the store's back, the digest recomputed.
        await _forge_stored(store, edit)
        # Open replays the log instead, says why, and shows the messages in their order.
        session = await store.open("s")
        assert session.snapshot_seq is None
        assert session.snapshot_fault is not None
        assert "which was appended later" in session.snapshot_fault
        assert state_of(session) == written
        assert [m.id for m in messages(session)] == shown
        await session.aclose()


@pytest.mark.parametrize("offset", [1, 2**40])
async def test_a_snapshot_claiming_a_seq_past_the_head_is_not_served_and_says_so(
    stores: Opener, offset: int
) -> None:
    async with stores(snapshot_every=0) as store:
        written, seq = await write_snapshotted(store)
    async with stores(snapshot_every=0) as store:
        # The body names a seq past the head (its digest recomputed; the row's columns left).
        def past_head(body: _Body) -> _Body:
            return msgspec.structs.replace(body, seq=body.seq + offset)

        stored = await store.stored_snapshot("s")
        assert stored is not None
        assert await store.store_snapshot("s", seq, stored[1], forge(stored[2], past_head))
        # Open replays, naming what is wrong (before: "does not decode: KeyError: <seq>").
        session = await store.open("s")
        fault = session.snapshot_fault
        assert fault is not None
        assert f"the event it covers (seq {seq + offset}) is not among those it holds" in fault
        assert state_of(session) == written
        await session.aclose()
        # The full check says the same, naming the snapshot's stored seq.
        with pytest.raises(CorruptLogError, match="is not among those it holds") as caught:
            await store.verify_snapshot("s")
        assert caught.value.seq == seq
