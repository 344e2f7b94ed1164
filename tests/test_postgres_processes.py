"""PostgreSQL across processes: real "hosts" (child processes) sharing sessions through the
server, killed with SIGKILL or paused with SIGSTOP, and a follower in another process."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

import recovery
from eventlog import (
    APPEND,
    Message,
    Session,
    SessionBusyError,
    StepEnd,
    StepStart,
    TurnEnd,
    TurnStart,
    UserMessage,
    open_store,
)
from eventlog.stores import LogStore
from recovery.testing import check_invariants
from tests.conftest import SOAK
from tests.pg_children.server import fresh_schema, raw_connection, store_url

pytestmark = [pytest.mark.postgres, pytest.mark.anyio]

ROOT = Path(__file__).resolve().parent.parent
#: Short leases so that takeovers happen within the test; hosts renew every third of it.
LEASE_TTL = 2.5


class Child:
    """A child process spoken to line by line."""

    def __init__(self, process: Process) -> None:
        self.process = process
        assert process.stdout is not None
        self._out = BufferedByteReceiveStream(process.stdout)

    @classmethod
    async def start(cls, module: str, *args: str) -> Child:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        process = await anyio.open_process(
            [sys.executable, "-m", f"tests.pg_children.{module}", *args],
            cwd=ROOT,
            env=env,
            stderr=None,
        )
        child = cls(process)
        assert await child.line() == "ready"
        return child

    async def line(self, timeout: float = 60) -> str:
        with anyio.fail_after(timeout):
            return (await self._out.receive_until(b"\n", 1 << 16)).decode().strip()

    async def send(self, command: str) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(command.encode() + b"\n")

    async def rest(self) -> list[str]:
        """Every line still to come until the process's output ends."""
        lines = []
        with anyio.fail_after(60):
            while True:
                try:
                    lines.append((await self._out.receive_until(b"\n", 1 << 16)).decode())
                except (anyio.EndOfStream, anyio.IncompleteRead):
                    return lines

    async def ask(self, command: str) -> str:
        await self.send(command)
        return await self.line()

    def signal(self, signum: int) -> None:
        os.kill(self.process.pid, signum)

    def _signal_unless_gone(self, signum: int) -> None:
        # The event loop's child watcher may have reaped the process already while
        # `returncode` still reads None (the loop has not run its callback yet): then the pid
        # is gone and there is nothing left to signal.
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.signal(signum)

    async def kill(self) -> None:
        self._signal_unless_gone(signal.SIGKILL)
        with anyio.fail_after(30):
            await self.process.wait()

    async def aclose(self) -> None:
        self._signal_unless_gone(signal.SIGCONT)
        self._signal_unless_gone(signal.SIGKILL)
        await self.process.aclose()


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema() as name:
        yield name


@pytest.fixture
async def children() -> AsyncIterator[list[Child]]:
    """Children started by a test; whatever still runs at the end is killed."""
    started: list[Child] = []
    try:
        yield started
    finally:
        with anyio.CancelScope(shield=True):
            for child in started:
                await child.aclose()


async def _host(children: list[Child], schema: str, session_id: str) -> Child:
    child = await Child.start("host", store_url(schema), session_id, str(LEASE_TTL))
    children.append(child)
    return child


def _store(schema: str) -> LogStore:
    return open_store(store_url(schema), lease_ttl=LEASE_TTL)


async def _create(schema: str, session_id: str) -> None:
    async with _store(schema) as store:
        await store.create(session_id=session_id)


async def _turns(schema: str, session_id: str) -> list[int]:
    """The turn numbers stored in a session (opening it verifies seqs and hash chain)."""
    async with _store(schema) as store:
        session = await store.open(session_id)
        return [e.data.turn for e in await session.events() if e.type == "turn/start"]


async def _lease_until(schema: str, session_id: str) -> Any:
    conn = await raw_connection()
    try:
        return await conn.fetchval(
            f'SELECT lease_until FROM "{schema}".sessions WHERE id = $1', session_id
        )
    finally:
        await conn.close()


async def _server_clock_passed(moment: Any) -> bool:
    conn = await raw_connection()
    try:
        return bool(await conn.fetchval("SELECT clock_timestamp() > $1", moment))
    finally:
        await conn.close()


async def test_two_hosts_opening_one_session_exactly_one_wins(
    schema: str, children: list[Child]
) -> None:
    await _create(schema, "s")
    a, b = await _host(children, schema, "s"), await _host(children, schema, "s")
    # Both ask at once: exactly one gets the lease.
    await a.send("open")
    await b.send("open")
    replies = {a: await a.line(), b: await b.line()}
    assert sorted(replies.values()) == ["busy", "opened -1"]
    winner, loser = (a, b) if replies[a] == "opened -1" else (b, a)
    for turn in (1, 2, 3):
        assert await winner.ask(f"turn {turn}") == f"flushed {turn * 6 - 1}"
    # While the winner lives (and renews its lease) the other host stays out.
    assert await loser.ask("open") == "busy"
    assert await winner.ask("close") == "closed"
    assert await loser.ask("open") == "opened 17"
    assert await loser.ask("turn 4") == "flushed 23"
    assert await loser.ask("close") == "closed"
    assert await _turns(schema, "s") == [1, 2, 3, 4]


async def test_four_hosts_writing_four_sessions_at_once_lose_nothing(
    schema: str, children: list[Child]
) -> None:
    ids = [f"s{i}" for i in range(4)]
    for sid in ids:
        await _create(schema, sid)
    hosts = [await _host(children, schema, sid) for sid in ids]
    for host in hosts:
        assert await host.ask("open") == "opened -1"
    # Every host sends its next turn before any answer is read: the rounds overlap.
    for turn in range(1, 9):
        for host in hosts:
            await host.send(f"turn {turn}")
        for host in hosts:
            assert await host.line() == f"flushed {turn * 6 - 1}"
    for host in hosts:
        assert await host.ask("close") == "closed"
    for sid in ids:
        assert await _turns(schema, sid) == list(range(1, 9))


@pytest.mark.parametrize("where", ["another-host", "this-host"])
async def test_a_host_killed_mid_turn_is_taken_over(
    schema: str, children: list[Child], where: str
) -> None:
    await _create(schema, "s")
    host = await _host(children, schema, "s")
    assert await host.ask("open") == "opened -1"
    assert await host.ask("turn 1") == "flushed 5"
    # Killed mid-turn, right after it flushed a tool call it was about to run.
    assert await host.ask("partial 2") == "flushed 10"
    await host.kill()
    conn = await raw_connection()
    try:
        if where == "another-host":
            # The lease now names a host whose processes cannot be seen from here.
            await conn.execute(
                f'UPDATE "{schema}".sessions SET writer = $1 || writer', "another-host:"
            )
        else:
            # Its lease would hold another hour: only the owner's death frees it.
            await conn.execute(
                f'UPDATE "{schema}".sessions '
                "SET lease_until = clock_timestamp() + interval '1 hour'"
            )
    finally:
        await conn.close()
    expiry = await _lease_until(schema, "s")
    async with _store(schema) as store:
        if where == "another-host":
            # The dead host's lease holds until it expires; then this host takes over.
            session = await _take_over(store, "s")
            assert await _server_clock_passed(expiry)
        else:
            # A process of this host that is gone: its lease is taken over at once.
            session = await store.open("s")
            assert not await _server_clock_passed(expiry)
        # Nothing the dead host flushed is lost.
        assert (session.head, session.durable) == (10, 10)
        report = await recovery.repair(session)
        closers = [(await session.events())[seq] for seq in report.appended]
        assert [e.type for e in closers] == ["tool/result", "tool/result", "step/end", "turn/end"]
        assert [e.data.error.code for e in closers[:2]] == [
            "TOOL_OUTCOME_UNKNOWN",
            "TOOL_NOT_STARTED",
        ]
        assert closers[-1].data.reason == "interrupted"
        check_invariants(session)
        # The session goes on under its new host.
        session.append("turn/start", TurnStart(turn=3))
        session.append("user/message", UserMessage(message=Message.user("again")), surface=APPEND)
        session.append("step/start", StepStart(turn=3, step=1))
        session.append("step/end", StepEnd(turn=3, step=1))
        session.append("turn/end", TurnEnd(turn=3, reason="completed"))
        await session.flush()
    assert await _turns(schema, "s") == [1, 2, 3]


async def _take_over(store: LogStore, session_id: str) -> Session:
    """Open ``session_id`` as soon as the lease of its dead host has run out."""
    with anyio.fail_after(30):
        while True:
            try:
                return await store.open(session_id)
            except SessionBusyError:
                await anyio.sleep(0.05)


async def test_hosts_killed_at_random_points_lose_nothing_they_flushed(
    schema: str, children: list[Child]
) -> None:
    await _create(schema, "s")
    chance = random.Random()
    for kill in range(15 if SOAK else 2):
        host = await _host(children, schema, "s")
        assert (await host.ask("open")).startswith("opened ")
        # Let it run for a random number of flushes, then kill it wherever it is.
        await host.send("loop")
        reported = [await host.line() for _ in range(chance.randint(1, 12))]
        host.signal(signal.SIGKILL)
        reported += await host.rest()
        await host.kill()
        flushed = max(int(line.split()[1]) for line in reported if line.startswith("flushed"))
        async with _store(schema) as store:
            session = await _take_over(store, "s")
            assert session.durable >= flushed, f"kill {kill}: lost flushed events"
            await recovery.repair(session)
            check_invariants(session)
            await session.aclose()


async def test_a_paused_host_is_fenced_once_another_took_over(
    schema: str, children: list[Child]
) -> None:
    await _create(schema, "s")
    host = await _host(children, schema, "s")
    assert await host.ask("open") == "opened -1"
    assert await host.ask("turn 1") == "flushed 5"
    # The host freezes (a long GC pause, a suspended VM) and stops renewing its lease.
    host.signal(signal.SIGSTOP)
    async with _store(schema) as store:
        session = await _take_over(store, "s")
        session.append("turn/start", TurnStart(turn=2))
        session.append("turn/end", TurnEnd(turn=2, reason="completed"))
        await session.flush()
        # It wakes up and writes as if nothing happened (its own next turn, 2: turn 3 would
        # be refused at commit, in its view): its round is refused.
        host.signal(signal.SIGCONT)
        assert await host.ask("turn 2") == "conflict"
    assert await _turns(schema, "s") == [1, 2]


async def test_follow_from_another_process_sees_every_event_once_in_order(
    schema: str, children: list[Child]
) -> None:
    await _create(schema, "s")
    total = 120
    follower = await Child.start("follower", store_url(schema), "s", str(total - 1))
    children.append(follower)
    async with _store(schema) as store:
        session = await store.open("s")
        for i in range(total):
            session.append(
                "user/message", UserMessage(message=Message.user(f"m{i}")), surface=APPEND
            )
            if i % 7 == 0:
                await session.flush()  # the rest goes out with the background writer
            if i % 20 == 0:
                await anyio.sleep(0.01)  # let rounds of different sizes form
        await session.flush()
    seen = [int(await follower.line()) for _ in range(total)]
    assert seen == list(range(total))
    with anyio.fail_after(30):
        assert await follower.process.wait() == 0
