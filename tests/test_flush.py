"""Flush: the durability barrier, group commit, write failure and cancellation.

The memory backend is the real reference store; a thin subclass makes its ``write`` fail on
demand, the way a full disk would.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import anyio
import pytest

from eventlog import APPEND, Message, Session, StoreWriteError, UserMessage
from eventlog.stores import Batch, LogStore, MemoryBackend, MemoryData
from eventlog.stores._round_state import TRANSITIONS, RoundState

pytestmark = pytest.mark.anyio


class FailingDisk(MemoryBackend):
    """The memory backend with a switch that makes writes fail, and a write log."""

    def __init__(self, data: MemoryData | None = None) -> None:
        super().__init__(data)
        self.failing = False
        self.rounds: list[list[tuple[str, list[int]]]] = []
        self.entered = anyio.Event()
        self.release: anyio.Event | None = None

    async def write(self, batches: Sequence[Batch]) -> Collection[str]:
        self.entered.set()
        if self.release is not None:
            await self.release.wait()
        if self.failing:
            raise OSError(28, "No space left on device")
        self.rounds.append([(b.session_id, [r.seq for r in b.rows]) for b in batches])
        return await super().write(batches)


def _say(session: Session, text: str) -> None:
    session.append("user/message", UserMessage(message=Message.user(text)), surface=APPEND)


async def test_one_round_writes_every_pending_session() -> None:
    disk = FailingDisk()
    async with LogStore(disk, write_delay=60) as store:
        a, b = await store.create(session_id="a"), await store.create(session_id="b")
        _say(a, "1")
        _say(b, "2")
        _say(a, "3")
        await a.flush()
        # One transaction held both sessions' rows, in commit order per session.
        assert disk.rounds == [[("a", [0, 1]), ("b", [0])]]
        assert (a.durable, b.durable) == (1, 0)


async def test_a_failed_write_keeps_the_batch_and_the_next_flush_writes_it_once() -> None:
    disk = FailingDisk()
    async with LogStore(disk, write_delay=60) as store:
        session = await store.create(session_id="s")
        _say(session, "before the disk filled")
        await session.flush()
        # The disk fills up: flush raises StoreWriteError with the cause chained.
        disk.failing = True
        _say(session, "one")
        _say(session, "two")
        with pytest.raises(StoreWriteError, match=r"session 's': writing seqs 1..2 failed") as e:
            await session.flush()
        assert isinstance(e.value.__cause__, OSError)
        assert (session.head, session.durable) == (2, 0)
        # Nothing was dropped from memory; more commits queue behind the failed batch.
        _say(session, "three")
        assert [ev.data.message.text for ev in await session.events(1)] == ["one", "two", "three"]
        # The fault clears: the next flush writes everything exactly once, in order.
        disk.failing = False
        await session.flush()
        assert session.durable == 3
        assert [seq for round_ in disk.rounds for _, seqs in round_ for seq in seqs] == [0, 1, 2, 3]
        stored = [ev.data.message.text async for ev in store.read("s")]
        assert stored == ["before the disk filled", "one", "two", "three"]


async def test_a_cancelled_flush_caller_does_not_cancel_the_write() -> None:
    disk = FailingDisk()
    disk.release = anyio.Event()
    async with LogStore(disk, write_delay=60) as store:
        session = await store.create(session_id="s")
        _say(session, "important")
        # The caller gives up while the write is in flight.
        async with anyio.create_task_group() as tg:
            tg.start_soon(session.flush)
            await disk.entered.wait()
            tg.cancel_scope.cancel()
        assert session.durable == -1
        # The write was in flight; it completes once the disk answers.
        disk.release.set()
        await session.flush()
        assert session.durable == 0
        assert disk.rounds == [[("s", [0])]]


async def test_closing_the_store_writes_pending_events() -> None:
    data = MemoryData()
    async with LogStore(MemoryBackend(data), write_delay=60) as store:
        session = await store.create(session_id="s")
        _say(session, "written at close")
    assert [r.seq for r in data.rows["s"]] == [0]


async def test_a_write_round_holds_flushers_of_several_sessions() -> None:
    disk = FailingDisk()
    async with LogStore(disk, write_delay=60) as store:
        sessions = [await store.create(session_id=f"s{i}") for i in range(5)]
        for i, session in enumerate(sessions):
            _say(session, str(i))
        async with anyio.create_task_group() as tg:
            for session in sessions:
                tg.start_soon(session.flush)
        assert all(s.durable == 0 for s in sessions)
        # Group commit: far fewer rounds than flush callers.
        assert len(disk.rounds) < len(sessions)


async def test_agents_woken_by_one_round_share_the_next() -> None:
    """Five agents in step, each committing and flushing three times: the flushers a round
    wakes all commit before the next round takes its rows, so each checkpoint is one round
    (not a round of the first flusher and another of the other four)."""
    disk = FailingDisk()
    async with LogStore(disk, write_delay=60) as store:
        sessions = [await store.create(session_id=f"s{i}") for i in range(5)]

        async def agent(session: Session) -> None:
            for checkpoint in range(3):
                _say(session, str(checkpoint))
                await session.flush()

        async with anyio.create_task_group() as tg:
            for session in sessions:
                tg.start_soon(agent, session)
        assert [len(round_) for round_ in disk.rounds] == [5, 5, 5]
        assert all(s.durable == 2 for s in sessions)


async def test_a_flush_whose_events_are_in_flight_returns_with_that_round() -> None:
    """A second flusher of a session whose events the round in flight already holds waits for
    that round only, not for the next one (which another session's commit asked for)."""
    disk = FailingDisk()
    disk.release = anyio.Event()
    async with LogStore(disk, write_delay=60) as store:
        a, b = await store.create(session_id="a"), await store.create(session_id="b")
        _say(a, "in flight")
        b_durable_when_a_returned: list[int] = []

        async def second_flush_of_a() -> None:
            await a.flush()
            b_durable_when_a_returned.append(b.durable)

        async with anyio.create_task_group() as tg:
            tg.start_soon(a.flush)
            await disk.entered.wait()  # the round of a's event is being written
            tg.start_soon(second_flush_of_a)
            _say(b, "committed while a's round is in flight")
            tg.start_soon(b.flush)
            await anyio.wait_all_tasks_blocked()
            disk.release.set()
        # a's second flush returned with the round that wrote a's event, before b's round.
        assert b_durable_when_a_returned == [-1]
        assert disk.rounds == [[("a", [0])], [("b", [0])]]
        assert (a.durable, b.durable) == (0, 0)


async def test_the_writer_walks_its_named_states_from_a_flush_to_the_close() -> None:
    """The rounds are a state machine whose every transition is listed (and checked as it is
    made): a flush asks, the rounds task writes, a flush during the write asks for the next
    round, the end of the write starts it, and the close ends the machine."""
    assert {state for pair in TRANSITIONS for state in pair} == set(RoundState)
    disk = FailingDisk()
    disk.release = anyio.Event()
    store = LogStore(disk, write_delay=60)

    def state() -> RoundState:
        return store._writer.state

    assert state() is RoundState.NEW
    async with store:
        assert state() is RoundState.IDLE
        a, b = await store.create(session_id="a"), await store.create(session_id="b")
        _say(a, "first round")
        async with anyio.create_task_group() as tg:
            tg.start_soon(a.flush)
            await disk.entered.wait()
            assert state() is RoundState.WRITING
            # b's flush asks for the next round while a's is written.
            _say(b, "second round")
            tg.start_soon(b.flush)
            await anyio.wait_all_tasks_blocked()
            assert state() is RoundState.WRITING_ASKED
            disk.release.set()
        assert state() is RoundState.IDLE
        assert disk.rounds == [[("a", [0])], [("b", [0])]]
    assert state() is RoundState.CLOSED


async def test_a_failed_round_in_flight_fails_the_flush_that_joined_it() -> None:
    disk = FailingDisk()
    disk.release = anyio.Event()
    async with LogStore(disk, write_delay=60) as store:
        session = await store.create(session_id="s")
        _say(session, "kept")
        failures: list[str] = []

        async def flush_expecting_failure() -> None:
            with pytest.raises(StoreWriteError) as caught:
                await session.flush()
            failures.append(caught.value.message)

        async with anyio.create_task_group() as tg:
            tg.start_soon(flush_expecting_failure)
            await disk.entered.wait()
            tg.start_soon(flush_expecting_failure)  # joins the round in flight
            await anyio.wait_all_tasks_blocked()
            disk.failing = True
            disk.release.set()
        assert len(failures) == 2 and session.durable == -1
        # Nothing was lost: the next flush writes the event once.
        disk.failing = False
        await session.flush()
        assert session.durable == 0 and disk.rounds == [[("s", [0])]]


async def test_closing_a_session_whose_flush_fails_keeps_it_open() -> None:
    disk = FailingDisk()
    async with LogStore(disk, write_delay=60) as store:
        session = await store.create(session_id="s")
        _say(session, "unwritten")
        disk.failing = True
        with pytest.raises(StoreWriteError):
            await session.aclose()
        # Still open, nothing dropped: once the disk recovers, closing writes it.
        _say(session, "still accepted")
        disk.failing = False
        await session.aclose()
        assert [r.seq for r in disk.data.rows["s"]] == [0, 1]
