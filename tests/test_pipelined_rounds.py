"""Pipelined write rounds on SQLite: many sessions flushing in step are written as two
alternating rounds, each started on the writer thread by the flush that fills it, while the
other half of the sessions append on the event loop.

A real SQLite file throughout. A thin subclass of the SQLite backend records the rounds it is
asked to start; what is asserted is what a user relies on: every flush returns with its
events durable, each event is stored exactly once and in order, a round that fails fails the
flushes it holds and the next flush retries, and a cancelled flusher never cancels a write.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from eventlog import APPEND, Message, Session, StoreWriteError, UserMessage
from eventlog.stores import Backend, Batch, LogStore
from eventlog.stores.sqlite import SQLiteBackend

pytestmark = pytest.mark.anyio

SESSIONS = 32


class RecordingSQLite(SQLiteBackend):
    """The SQLite backend, recording how many sessions each round it started held."""

    def __init__(self, path: str, **options: object) -> None:
        super().__init__(path, **options)  # type: ignore[arg-type]
        self.started: list[int] = []
        self.round_started = anyio.Event()

    def start_write(
        self,
        batches: Sequence[Batch],
        done: Callable[[Collection[str], BaseException | None], None],
    ) -> None:
        self.started.append(len(batches))
        self.round_started.set()
        super().start_write(batches, done)


def _say(session: Session, text: str) -> None:
    session.append("user/message", UserMessage(message=Message.user(text)), surface=APPEND)


async def _checkpoint(sessions: list[Session], text: str) -> None:
    """Every session commits one message and flushes, all at once (agents in step)."""

    async def one(session: Session) -> None:
        _say(session, f"{session.id}: {text}")
        await session.flush()
        # The barrier: everything committed before the call is durable on return.
        assert session.durable == session.head

    async with anyio.create_task_group() as tg:
        for session in sessions:
            tg.start_soon(one, session)


async def _reopened_heads(backend: Backend, sessions: list[Session]) -> list[int]:
    """Each session's head, reopened in a new store over ``backend`` with the whole chain
    verified (``verify="full"``)."""
    heads = []
    async with LogStore(backend) as store:
        for session in sessions:
            reopened = await store.open(session.id, verify="full")
            heads.append(reopened.head)
            await reopened.aclose()
    return heads


async def _stored_texts(path: Path, session_id: str) -> list[str]:
    async with LogStore(SQLiteBackend(str(path))) as store:
        return [e.data.message.text async for e in store.read(session_id)]


async def test_sessions_in_step_are_written_as_two_alternating_rounds(tmp_path: Path) -> None:
    path = tmp_path / "many.db"
    backend = RecordingSQLite(str(path))
    async with LogStore(backend, write_delay=60) as store:
        sessions = [await store.create(session_id=f"s{i}") for i in range(SESSIONS)]
        # The first checkpoint is one round for everyone (nothing is known of the load yet).
        await _checkpoint(sessions, "0")
        assert backend.started == []
        # From then on, each checkpoint's flushers fill two rounds of half the sessions each,
        # started on the writer thread: the second half appends while the first is written.
        for checkpoint in range(1, 6):
            await _checkpoint(sessions, str(checkpoint))
        assert backend.started and set(backend.started) == {SESSIONS // 2}
        assert len(backend.started) == 2 * 5
    # Every event is stored once, in order, and the whole chain verifies on a full open.
    for session in sessions:
        expected = [f"{session.id}: {n}" for n in range(6)]
        assert await _stored_texts(path, session.id) == expected
    assert await _reopened_heads(SQLiteBackend(str(path)), sessions) == [5] * SESSIONS


async def test_a_pipelined_round_that_cannot_write_fails_its_flushes_and_the_next_retries(
    tmp_path: Path,
) -> None:
    path = tmp_path / "locked.db"
    # Another process's write lock is waited for a fifth of a second, then the round fails.
    backend = RecordingSQLite(str(path), busy_timeout=0.2)
    async with LogStore(backend, write_delay=60) as store:
        sessions = [await store.create(session_id=f"s{i}") for i in range(SESSIONS)]
        await _checkpoint(sessions, "0")
        await _checkpoint(sessions, "1")
        assert backend.started, "the rounds are pipelined by now"
        # Another application holds the database's write lock for longer than busy_timeout.
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        failed: list[str] = []

        async def one(session: Session) -> None:
            _say(session, f"{session.id}: 2")
            try:
                await session.flush()
            except StoreWriteError as exc:
                assert "database is locked" in str(exc.__cause__), exc
                failed.append(session.id)

        async with anyio.create_task_group() as tg:
            for session in sessions:
                tg.start_soon(one, session)
        # No flush returned as if it were durable: each raised, and nothing was dropped.
        assert sorted(failed) == sorted(s.id for s in sessions)
        assert all((s.head, s.durable) == (2, 1) for s in sessions)
        # The lock is released: the next checkpoint writes the kept events and the new ones.
        other.execute("ROLLBACK")
        other.close()
        await _checkpoint(sessions, "3")
    for session in sessions:
        expected = [f"{session.id}: {n}" for n in range(4)]
        assert await _stored_texts(path, session.id) == expected


async def test_cancelled_flushers_never_cancel_a_pipelined_write(tmp_path: Path) -> None:
    path = tmp_path / "cancelled.db"
    backend = RecordingSQLite(str(path))
    async with LogStore(backend, write_delay=60) as store:
        sessions = [await store.create(session_id=f"s{i}") for i in range(SESSIONS)]
        await _checkpoint(sessions, "0")
        backend.round_started = anyio.Event()
        # Every agent commits and flushes; they are all cancelled the moment a round of theirs
        # has been started on the writer thread.
        async with anyio.create_task_group() as tg:
            for session in sessions:
                tg.start_soon(_checkpoint, [session], "1")
            await backend.round_started.wait()
            tg.cancel_scope.cancel()
        assert backend.started
        # Whatever was started is written; a flush now covers the rest. Nothing is lost and
        # nothing is written twice.
        for session in sessions:
            await session.flush()
            assert session.durable == session.head == 1
    for session in sessions:
        assert await _stored_texts(path, session.id) == [f"{session.id}: {n}" for n in range(2)]


async def test_pipelined_rounds_keep_their_rows_for_the_next_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Snapshots take their surface events from the rows the writer wrote (no payload encoded
    twice), also when those rows were written by pipelined rounds."""
    import eventlog.stores._snapshots as snapshots_module
    from tests.test_snapshot_rows import PLANS, check_snapshot_is_the_stored_rows
    from tests.test_snapshots import play

    encoded: list[str] = []
    real = snapshots_module._row

    def watched(event: Any, types: Any) -> Any:
        encoded.append(event.type)
        return real(event, types)

    monkeypatch.setattr(snapshots_module, "_row", watched)
    path = tmp_path / "snapshots.db"
    backend = RecordingSQLite(str(path))
    async with LogStore(backend, write_delay=60, snapshot_every=30) as store:
        sessions = [await store.create(session_id=f"s{i}") for i in range(SESSIONS)]

        async def turn(session: Session, number: int) -> None:
            play(session, number, PLANS[number - 1])
            await session.flush()

        for number in range(1, 9):
            async with anyio.create_task_group() as tg:
                for session in sessions:
                    tg.start_soon(turn, session, number)
        assert backend.started, "the rounds were pipelined"
        assert encoded and set(encoded) == {"turn/end"}
        await store._checkpointer.settled()
        for session in sessions:
            await check_snapshot_is_the_stored_rows(store, session.id)


async def test_a_round_opened_by_the_writer_threads_answer_waits_on_the_loops_own_event(
    tmp_path: Path,
) -> None:
    # A pipelined round is opened in the callback that delivers the previous round's answer,
    # outside any task. anyio.Event() made there cannot see the running library and returns an
    # adapter that looks it up again on every wait: a cost paid by every flusher of the round.
    backend = RecordingSQLite(str(tmp_path / "events.db"))
    loop_event = type(anyio.Event())
    async with LogStore(backend, write_delay=60) as store:
        sessions = [await store.create(session_id=f"s{i}") for i in range(SESSIONS)]
        for checkpoint in range(3):
            await _checkpoint(sessions, str(checkpoint))
        assert backend.started, "no round was pipelined: the scenario tests nothing"
        writer = store._writer  # the next round's event is what the next flushers wait on
        assert type(writer._next_round.done) is loop_event
