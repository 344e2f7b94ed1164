"""A long-lived session's memory (docs/stores.md, "A long-lived session"): a session that stays
open while it compacts drops, at each snapshot, the events that snapshot covers, as if it had
been reopened from it; what it reads through the projections is what a reopened one reads."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from eventlog import (
    Event,
    EventNotLoadedError,
    Session,
    ValidationError,
    open_store,
)
from eventlog.stores import DEFAULT_TRIM_EVERY, LogStore
from projections import messages, timeline
from projections.base import catch_up, fold
from tests.test_snapshots import TurnPlan, play, state_of
from tests.three_stores import Opener, stores

__all__ = ("stores",)

pytestmark = pytest.mark.anyio

#: Trim at every snapshot (the exact "as if reopened" behaviour), snapshot every 15 events.
TRIMMING = {"snapshot_every": 15, "trim_every": 1}


def plan(turn: int) -> TurnPlan:
    """Turns of two steps (one and two tool calls), a compaction after every third."""
    return TurnPlan(calls=(1, 2), header=turn % 5 == 1, queued=turn % 4 == 0, compact=turn % 3 == 0)


def held(session: Session) -> int:
    """How many events the session holds in memory."""
    return session.head + 1 - session.loaded_from + len(session.pinned)


async def live_run(
    session: Session, turns: int, first: int = 1, *, settle: LogStore | None = None
) -> list[int]:
    """Play ``turns`` planned turns, flushing after each; the events held after each flush.
    With ``settle``, each flush also waits for that store's snapshot writes in flight, so no
    snapshot is skipped because the one before is still being written (how many would be
    depends on the host's speed, not on the session)."""
    counts = []
    for turn in range(first, first + turns):
        play(session, turn, plan(turn))
        await session.flush()
        if settle is not None:
            await settle._checkpointer.settled()
        counts.append(held(session))
    return counts


async def full_log(store: LogStore, session_id: str) -> list[Event]:
    return [event async for event in store.read(session_id)]


async def test_a_compacting_live_session_holds_a_bounded_number_of_events(
    stores: Opener,
) -> None:
    async with stores(**TRIMMING) as store:
        session = await store.create(session_id="s")
        assert session.trims
        # Sixty turns (about 900 events), compacting every third, all in one open session.
        # Each flush waits for the snapshot writes in flight: on a loaded host a write can
        # outlast several turns, and the snapshots skipped meanwhile (none is captured while
        # the previous one is still being written) would make the count the host's.
        counts = await live_run(session, 60, settle=store)
        # It never holds more than a few turns' worth of events (15 each), however long the
        # log grows: the surface (at most three turns since the last compaction), the events
        # since the latest snapshot, and those a cached projection has not folded yet (the
        # inbox, read when a turn queues an item, is caught up only by a snapshot).
        assert session.head > 800
        assert max(counts[10:]) < 150
        assert session.loaded_from > 600
        # What it reads through the projections is what a full replay reads.
        live_state, live_timeline = state_of(session), timeline(session)
        events = await full_log(store, "s")
        await session.aclose()
        full = await store.open("s", verify="full")
        assert state_of(full) == live_state
        # The timeline was trimmed with the events: beyond what is open (equal above) it knows
        # only the calls since its latest trim, as one restored from a snapshot does, not all
        # those a full replay knows (tests/test_live_timeline.py).
        assert set(live_timeline.calls()) < set(timeline(full).calls())
        assert len(timeline(full).calls()) == 60 * 3
        assert list(await full.events()) == events
        await full.aclose()


async def test_a_trimmed_session_reads_old_events_as_one_opened_from_a_snapshot(
    stores: Opener,
) -> None:
    async with stores(**TRIMMING) as store:
        session = await store.create(session_id="s")
        await live_run(session, 12)
        base = session.loaded_from
        assert base > 0
        events = await full_log(store, "s")
        # events() reads every event: the dropped ones from the store, then memory.
        assert list(await session.events()) == events
        assert list(await session.events(2, 5)) == events[2:7]
        assert [e async for e in session.read_events(0)] == events
        # The window says where it starts; asked for a dropped event, it names its seq and
        # what to call instead.
        window = session.window()
        assert (window.start, window.stop) == (base, session.head + 1)
        with pytest.raises(EventNotLoadedError, match=r"session 's', seq 3: before the") as err:
            window.event(3)
        assert err.value.seq == 3 and "await session.events" in str(err.value)
        with pytest.raises(EventNotLoadedError, match=r"seq 0: before the session's window"):
            session.window(0)
        # The surface's older events and everything from loaded_from are still held.
        for seq in [*session.surface_index.nodes, *range(base, session.head + 1)]:
            assert window.event(seq) == events[seq]
        assert list(session.window(base)) == events[base:]
        # load_history makes it whole again, and from then on it stays whole.
        await session.load_history()
        assert (session.loaded_from, session.pinned, session.trims) == (0, {}, False)
        assert list(session.window(0)) == events
        await live_run(session, 6, first=13)
        assert session.loaded_from == 0
        assert list(session.window(0)) == await full_log(store, "s")
        await session.aclose()


async def test_views_handed_out_before_a_trim_stay_valid() -> None:
    async with open_store("memory:", **TRIMMING) as store:
        session = await store.create(session_id="s")
        await live_run(session, 2)
        # A view of the whole log, taken while every event is held ...
        view = session.window(0)
        first = list(view)
        # ... is the same after the session dropped most of those events.
        await live_run(session, 10, first=3)
        assert session.loaded_from > len(first)
        assert list(view) == first and len(view) == len(first)
        assert view[0] == first[0]
        await session.aclose()


async def test_read_events_keeps_streaming_while_a_snapshot_trims_under_it() -> None:
    async with open_store("memory:", **TRIMMING) as store:
        session = await store.create(session_id="s")
        await live_run(session, 3)
        expected_head = session.head
        seen: list[Event] = []
        turn = 4
        # The reader holds one event at a time; between two, the writer plays a turn and
        # flushes, and its snapshot drops the events the reader has not reached yet.
        async for event in session.read_events(0):
            seen.append(event)
            if turn <= 12:
                await live_run(session, 1, first=turn)
                turn += 1
        assert session.loaded_from > expected_head
        # Every event up to the head as of the call, in order, none skipped or repeated.
        assert seen == (await full_log(store, "s"))[: expected_head + 1]
        await session.aclose()


class CountTypes:
    """A projection of the app's own (not registered for snapshots): events per type."""

    key = "tests.count-types"

    def initial(self) -> dict[str, int]:
        return {}

    def apply(self, state: dict[str, int], event: Event) -> dict[str, int]:
        state[event.type] = state.get(event.type, 0) + 1
        return state


async def test_a_lagging_projection_holds_back_the_trim_and_never_breaks(
    stores: Opener,
) -> None:
    counts = CountTypes()
    async with stores(**TRIMMING) as store:
        session = await store.create(session_id="s")
        await live_run(session, 2)
        # The app reads its projection once, early; its cursor stays at that seq ...
        catch_up(session, counts)
        cursor = session.head + 1
        # ... while the session compacts and snapshots many times.
        await live_run(session, 15, first=3)
        assert 0 < session.loaded_from <= cursor
        # Read again, it folds every event it had not seen and equals a full fold.
        events = await full_log(store, "s")
        assert catch_up(session, counts) == fold(counts, events)
        # Caught up, it no longer holds the trim back: the next snapshot drops those events.
        await live_run(session, 3, first=18)
        assert session.loaded_from > cursor
        assert catch_up(session, counts) == fold(counts, await full_log(store, "s"))
        await session.aclose()


async def test_a_session_opened_whole_is_never_trimmed(stores: Opener) -> None:
    async with stores(**TRIMMING) as store:
        session = await store.create(session_id="s")
        await live_run(session, 6)
        await session.aclose()
        # Opened with keep_whole=True, it asked for its whole log: it keeps it while it
        # compacts, and its window reads all of it synchronously.
        whole = await store.open("s", keep_whole=True)
        assert whole.trims is False and whole.snapshot_seq is None
        await live_run(whole, 12, first=7)
        assert whole.loaded_from == 0
        assert list(whole.window(0)) == await full_log(store, "s")
        await whole.aclose()
        # verify="full" only verifies: the session it opens trims like any other.
        verified = await store.open("s", verify="full")
        assert verified.trims and verified.loaded_from == 0
        await live_run(verified, 6, first=19)
        assert verified.loaded_from > 0
        assert list(await verified.events()) == await full_log(store, "s")
        await verified.aclose()


async def test_keep_whole_is_a_bool(stores: Opener) -> None:
    async with stores() as store:
        await (await store.create(session_id="s")).aclose()
        with pytest.raises(ValidationError, match="keep_whole must be True or False"):
            await store.open("s", keep_whole=1)  # type: ignore[arg-type]


class Count:
    """A fold over ``events()``, as application code writes one: events per type."""

    def __init__(self) -> None:
        self.types: dict[str, int] = {}
        self.seqs: list[int] = []

    def add(self, event: Event) -> None:
        self.types[event.type] = self.types.get(event.type, 0) + 1
        self.seqs.append(event.seq)


async def test_folding_events_of_a_30000_event_live_session_reads_them_all(
    stores: Opener,
) -> None:
    # The default trim_every (10,000), snapshots every 1,000 events: one session open for
    # writing, compacting as it goes, grows to 30,000 events and trims at its snapshots.
    async with stores(snapshot_every=1000) as store:
        session = await store.create(session_id="long")
        turn = 1
        while session.head < 30_000:
            for _ in range(10):
                play(session, turn, plan(turn))
                turn += 1
            await session.flush()
        await store._checkpointer.settled()
        # It trimmed: the window no longer starts at 0 ...
        assert session.trims and session.loaded_from >= DEFAULT_TRIM_EVERY
        # ... yet a fold over events() sees every event once, in order, as the store has them.
        count = Count()
        for event in await session.events():
            count.add(event)
        assert count.seqs == list(range(session.head + 1))
        assert list(await session.events()) == await full_log(store, "long")
        # So does a fold from any seq, and one streamed with read_events.
        assert [e.seq async for e in session.read_events(5)] == list(range(5, session.head + 1))
        assert [e.seq for e in await session.events(9_990, 20)] == list(range(9_990, 10_010))
        await session.aclose()


async def test_trimming_can_be_turned_off_and_waits_for_trim_every_events() -> None:
    async with open_store("memory:", snapshot_every=15, trim_every=0) as store:
        kept = await store.create(session_id="kept")
        assert not kept.trims
        await live_run(kept, 30)
        assert kept.loaded_from == 0 and held(kept) == kept.head + 1
        await kept.aclose()
    # With the default, a session shorter than trim_every keeps its whole log in memory
    # (most chats, and code that folds events() from 0, see no change) ...
    assert DEFAULT_TRIM_EVERY == 10_000
    async with open_store("memory:", snapshot_every=15) as store:
        short = await store.create(session_id="short")
        await live_run(short, 30)
        assert short.trims and short.loaded_from == 0
        await short.aclose()
    # ... and a longer one drops a batch once that many events would go.
    async with open_store("memory:", snapshot_every=15, trim_every=200) as store:
        batched = await store.create(session_id="batched")
        counts = await live_run(batched, 60)
        assert 200 <= batched.loaded_from
        assert max(counts) < 200 + 80
        await batched.aclose()


@pytest.mark.parametrize("bad", [-1, 1.5, True, "10"])
def test_a_bad_trim_every_is_refused_naming_the_option(bad: Any) -> None:
    with pytest.raises(ValidationError, match="option trim_every must be"):
        open_store("memory:", trim_every=bad)


_CHILD = """
import sys, anyio
from eventlog import open_store
from tests.test_live_trim import plan
from tests.test_snapshots import play

async def main(url):
    async with open_store(url, snapshot_every=7, trim_every=1) as store:
        session = await store.create(session_id="s")
        turn = 0
        while True:
            turn += 1
            play(session, turn, plan(turn))
            await session.flush()
            print(session.head, session.loaded_from, flush=True)

anyio.run(main, sys.argv[1])
"""


@pytest.mark.parametrize("flushes", [5, 40])
async def test_a_kill_of_a_trimming_session_loses_nothing(tmp_path: Path, flushes: int) -> None:
    # A real process writes, compacts, snapshots and trims until it is killed right after its
    # n-th flush returned, while it is already writing the next turn.
    path = tmp_path / "killed.db"
    root = Path(__file__).resolve().parent.parent
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, f"sqlite:///{path}"],
        stdout=subprocess.PIPE,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert child.stdout is not None
    reported = [child.stdout.readline().split() for _ in range(flushes)]
    child.send_signal(signal.SIGKILL)
    reported += [line.split() for line in child.stdout.read().splitlines()]
    child.stdout.close()
    child.wait()
    flushed = [int(head) for head, _ in reported]
    # It had dropped events from memory before it died.
    assert int(reported[flushes - 1][1]) > 0
    async with open_store(f"sqlite:///{path}") as store:
        resumed = await store.open("s")
        assert resumed.snapshot_fault is None and resumed.head >= flushed[-1]
        state = (state_of(resumed), list(messages(resumed)))
        await resumed.aclose()
        full = await store.open("s", verify="full")
        assert (state_of(full), list(messages(full))) == state
        await full.aclose()


def test_the_store_options_carry_trim_every_to_a_wrapping_store() -> None:
    store = open_store("memory:", trim_every=7)
    options = store.options_over(lambda backend: backend)
    assert options["trim_every"] == 7 and LogStore(**options).trim_every == 7
