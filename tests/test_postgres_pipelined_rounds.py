"""Pipelined write rounds on PostgreSQL: the server writes a round while the event loop goes
on, so many sessions flushing in step are written as two alternating rounds, each started (in
a task of its own) by the flush that fills it, while the other half of the sessions append.

The real PostgreSQL server throughout. A thin subclass of the backend records the size of each
round it writes; what is asserted is what a user relies on: every flush returns with its events
durable, each event is stored exactly once and in order, the chain verifies, a round that fails
fails the flushes it holds and the next flush retries, and a cancelled flusher never cancels a
write.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence

import anyio
import pytest

from eventlog import Session, StoreWriteError
from eventlog.stores import Batch, LogStore
from eventlog.stores.postgres import PostgresBackend
from tests.pg_children.server import fresh_schema, raw_connection, store_url
from tests.test_pipelined_rounds import _checkpoint, _reopened_heads, _say

pytestmark = [pytest.mark.postgres, pytest.mark.anyio]

SESSIONS = 32


class RecordingPostgres(PostgresBackend):
    """The PostgreSQL backend, recording how many sessions each round it wrote held, and able
    to fail the next round (as a lost connection would)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.rounds: list[int] = []
        self.round_started = anyio.Event()
        self.fail_next = False

    async def write(self, batches: Sequence[Batch]) -> Collection[str]:
        self.rounds.append(len(batches))
        self.round_started.set()
        if self.fail_next:
            self.fail_next = False
            raise StoreWriteError("the connection was lost (injected by the test)")
        return await super().write(batches)


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema() as name:
        yield name


async def _stored_texts(schema: str, session_id: str) -> list[str]:
    """The session's stored messages, read back through a new store; every seq is stored once."""
    conn = await raw_connection()
    try:
        seqs = await conn.fetch(
            f'SELECT seq FROM "{schema}".events WHERE session_id = $1 ORDER BY seq', session_id
        )
    finally:
        await conn.close()
    assert [r["seq"] for r in seqs] == list(range(len(seqs))), "a seq is missing or twice"
    async with LogStore(PostgresBackend(store_url(schema))) as store:
        return [e.data.message.text async for e in store.read(session_id)]


async def test_sessions_in_step_are_written_as_two_alternating_rounds(schema: str) -> None:
    backend = RecordingPostgres(store_url(schema))
    async with LogStore(backend, write_delay=60) as store:
        sessions = [await store.create(session_id=f"s{i}") for i in range(SESSIONS)]
        # The first checkpoint is one round for everyone (nothing is known of the load yet).
        await _checkpoint(sessions, "0")
        assert backend.rounds[-1] == SESSIONS
        backend.rounds.clear()
        # From then on each checkpoint's flushers fill two rounds of half the sessions each:
        # the second half appends while the server writes the first.
        for checkpoint in range(1, 6):
            await _checkpoint(sessions, str(checkpoint))
        assert set(backend.rounds) == {SESSIONS // 2}, backend.rounds
        assert len(backend.rounds) == 2 * 5
    for session in sessions:
        expected = [f"{session.id}: {n}" for n in range(6)]
        assert await _stored_texts(schema, session.id) == expected
    assert await _reopened_heads(PostgresBackend(store_url(schema)), sessions) == [5] * SESSIONS


async def test_a_pipelined_round_that_fails_fails_its_flushes_and_the_next_retries(
    schema: str,
) -> None:
    backend = RecordingPostgres(store_url(schema))
    async with LogStore(backend, write_delay=60) as store:
        sessions = [await store.create(session_id=f"s{i}") for i in range(SESSIONS)]
        await _checkpoint(sessions, "0")
        await _checkpoint(sessions, "1")
        assert SESSIONS // 2 in backend.rounds, "the rounds are pipelined by now"
        backend.fail_next = True
        failed: list[str] = []

        async def one(session: Session) -> None:
            _say(session, f"{session.id}: 2")
            try:
                await session.flush()
            except StoreWriteError as exc:
                assert "injected by the test" in str(exc), exc
                failed.append(session.id)

        async with anyio.create_task_group() as tg:
            for session in sessions:
                tg.start_soon(one, session)
        # The flushes of the failed round raised (their events were kept and are written by a
        # later round); the others, of the next round, returned durable.
        assert failed and len(failed) < SESSIONS
        assert all(s.durable == 2 for s in sessions if s.id not in failed)
        # The next checkpoint writes the kept events and the new ones.
        await _checkpoint(sessions, "3")
    for session in sessions:
        expected = [f"{session.id}: {n}" for n in range(4)]
        assert await _stored_texts(schema, session.id) == expected


async def test_cancelled_flushers_never_cancel_a_pipelined_write(schema: str) -> None:
    backend = RecordingPostgres(store_url(schema))
    async with LogStore(backend, write_delay=60) as store:
        sessions = [await store.create(session_id=f"s{i}") for i in range(SESSIONS)]
        await _checkpoint(sessions, "0")
        await _checkpoint(sessions, "1")
        backend.round_started = anyio.Event()
        # Every agent commits and flushes; they are all cancelled the moment a round of theirs
        # is being written.
        async with anyio.create_task_group() as tg:
            for session in sessions:
                tg.start_soon(_checkpoint, [session], "2")
            await backend.round_started.wait()
            tg.cancel_scope.cancel()
        # Whatever was started is written; a flush now covers the rest. Nothing is lost and
        # nothing is written twice.
        for session in sessions:
            await session.flush()
            assert session.durable == session.head == 2
    for session in sessions:
        assert await _stored_texts(schema, session.id) == [f"{session.id}: {n}" for n in range(3)]
