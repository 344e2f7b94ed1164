"""Snapshots (docs/stores.md): opening from one gives exactly what a full replay gives, a bad
one is ignored and reported, and older events stay readable from the store."""

from __future__ import annotations

import logging
import os
import signal
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from eventlog import (
    APPEND,
    AssistantMessage,
    EventTypes,
    Message,
    Replace,
    RequestHeader,
    Session,
    StepEnd,
    StepStart,
    ToolCall,
    ToolCallPart,
    ToolOutcome,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
    open_store,
)
from eventlog.stores import MemoryData
from projections import (
    inbox,
    messages,
    messages_at,
    request_header,
    surface,
    timeline,
    timeline_at,
)
from projections.inbox import enqueue
from tests.three_stores import Opener, stores

__all__ = ("stores",)

pytestmark = pytest.mark.anyio


@dataclass(frozen=True)
class TurnPlan:
    """One turn of a generated session: calls per step, and what follows the turn."""

    calls: tuple[int, ...]  # tool calls proposed in each step
    header: bool  # a request/header before the first step
    queued: bool  # an inbox item queued during the turn
    compact: bool  # the whole surface replaced by a summary after the turn


turn_plans = st.builds(
    TurnPlan,
    calls=st.lists(st.integers(0, 2), min_size=1, max_size=3).map(tuple),
    header=st.booleans(),
    queued=st.booleans(),
    compact=st.booleans(),
)


def _step(session: Session, turn: int, step: int, calls: int, *, answer: bool = True) -> None:
    session.append("step/start", StepStart(turn=turn, step=step))
    ids = [f"c{turn}-{step}-{i}" for i in range(calls)]
    parts = tuple(ToolCallPart(id=i, name="read", arguments="{}") for i in ids)
    message = Message.assistant(f"step {step} of turn {turn}", tool_calls=parts)
    data = AssistantMessage(
        turn=turn, step=step, message=message, finish="tool-calls" if calls else "stop"
    )
    session.append("assistant/message", data, surface=APPEND)
    for call_id in ids:
        session.append(
            "tool/call",
            ToolCall(turn=turn, step=step, call_id=call_id, name="read", arguments="{}"),
        )
        result = Message.tool_result(call_id, f"contents for {call_id}")
        outcome = ToolOutcome(turn=turn, step=step, call_id=call_id, result=result)
        session.append("tool/outcome", outcome)
        if answer:
            session.append(
                "tool/result", ToolResult(turn=turn, step=step, message=result), surface=APPEND
            )
    if answer:
        session.append("step/end", StepEnd(turn=turn, step=step))


def play(session: Session, turn: int, plan: TurnPlan, *, crash: bool = False) -> None:
    """Append one planned turn; with ``crash`` its last step stays open, its calls unanswered."""
    session.append("turn/start", TurnStart(turn=turn))
    session.append("user/message", UserMessage(message=Message.user(f"ask {turn}")), surface=APPEND)
    if plan.header:
        session.append("request/header", RequestHeader(model=f"model-{turn}", system="be brief"))
    if plan.queued:
        session.append(
            "agent/inbox/spliced",
            enqueue(inbox(session), "next-turn", Message.user(f"later {turn}")),
        )
    for step, calls in enumerate(plan.calls, start=1):
        last = step == len(plan.calls)
        _step(session, turn, step, calls, answer=not (crash and last))
    if crash:
        return
    session.append("turn/end", TurnEnd(turn=turn, reason="completed"))
    if plan.compact:
        nodes = list(session.surface_index.nodes)
        summary = UserMessage(message=Message.user(f"summary up to turn {turn}"))
        session.append("user/message", summary, surface=Replace(nodes[0], nodes[-1]), sources=nodes)


def state_of(session: Session) -> tuple[Any, ...]:
    """Everything ``open`` rebuilds, as read through the projections."""
    line = timeline(session)
    index = session.surface_index
    grammar = session.grammar
    return (
        session.head,
        session.last_hash,
        list(surface(session)),
        list(index.balances),
        index.generation,
        list(messages(session)),
        (line.seq, line.turn, line.step, line.next_turn, line.next_step),
        (line.open_calls, line.unanswered, line.dangling, line.findings),
        inbox(session),
        request_header(session),
        (grammar.turn, grammar.step, grammar.last_turn, grammar.last_step),
    )


async def write(store: Any, plans: list[TurnPlan], crash: bool) -> tuple[Any, ...]:
    session = await store.create(session_id="s")
    for turn, plan in enumerate(plans, start=1):
        play(session, turn, plan, crash=crash and turn == len(plans))
        await session.flush()
    state = state_of(session)
    await session.aclose()
    return state


@settings(max_examples=60, deadline=None)
@given(
    plans=st.lists(turn_plans, min_size=1, max_size=12),
    every=st.sampled_from([1, 9, 40]),
    crash=st.booleans(),
)
def test_reopening_from_a_snapshot_gives_what_a_full_replay_gives(
    plans: list[TurnPlan], every: int, crash: bool
) -> None:
    async def scenario() -> None:
        data = MemoryData()
        # A session written through the API, flushed after each turn, maybe left mid-step.
        async with open_store("memory:", data=data, snapshot_every=every) as store:
            written = await write(store, plans, crash)
        # Reopened (from its latest snapshot, if one was written) and replayed in full.
        async with open_store("memory:", data=data.restarted(), snapshot_every=every) as store:
            resumed = await store.open("s")
            note(f"snapshot at {resumed.snapshot_seq} of head {resumed.head}")
            assert resumed.snapshot_fault is None
            assert state_of(resumed) == written
            await resumed.aclose()
            # The full check rebuilds it from the log and finds it the log's.
            assert await store.verify_snapshot("s") == resumed.snapshot_seq
            full = await store.open("s", verify="full")
            assert state_of(full) == written
            # What stood after any event reads the same from both (older events from the store).
            for at in sorted({0, full.head // 2, full.head}):
                assert await messages_at(resumed, at) == messages(full, at=at)
                assert await timeline_at(resumed, at) == timeline(full, at=at)
            await full.aclose()

    anyio.run(scenario)


async def test_every_store_resumes_a_compacted_session_from_its_snapshot(
    stores: Opener, caplog: pytest.LogCaptureFixture
) -> None:
    plans = [
        TurnPlan(calls=(1, 2), header=t == 1, queued=t == 3, compact=t % 3 == 0)
        for t in range(1, 10)
    ]
    async with stores(snapshot_every=25) as store:
        written = await write(store, plans, crash=True)
    async with stores(snapshot_every=25) as store:
        with caplog.at_level(logging.INFO, logger="eventlog"):
            resumed = await store.open("s")
        # Every state came from the snapshot itself (none rebuilt from older events).
        assert caplog.text == ""
        assert resumed.snapshot_seq is not None and resumed.snapshot_fault is None
        assert state_of(resumed) == written
        # Memory holds the surface and what followed the snapshot, not the log.
        held = len(resumed.pinned) + resumed.head + 1 - resumed.loaded_from
        assert held < resumed.head + 1
        # Loading the history makes it a full session: every event, every projection rebuilt.
        await resumed.load_history()
        assert (resumed.loaded_from, resumed.pinned) == (0, {})
        assert state_of(resumed) == written
        await resumed.aclose()
        full = await store.open("s", verify="full")
        assert list(await resumed.events()) == list(await full.events())
        assert timeline(resumed) == timeline(full)


async def test_a_stale_snapshot_is_ignored_and_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Two sessions of the same id, one after the other: the first one's snapshot is left in
    # the table (as a snapshot write racing a delete could leave it).
    path = tmp_path / "stale.db"
    plans = [TurnPlan(calls=(1,), header=False, queued=False, compact=True)] * 4
    async with open_store(f"sqlite:///{path}", snapshot_every=10) as store:
        await write(store, plans, crash=False)
    with sqlite3.connect(path) as db:
        kept = db.execute("SELECT session_id, seq, hash, data FROM snapshots").fetchall()
    db.close()
    async with open_store(f"sqlite:///{path}", snapshot_every=0) as store:
        await store.delete("s")
        other = [TurnPlan(calls=(2,), header=True, queued=False, compact=False)] * 5
        written = await write(store, other, crash=False)
    with sqlite3.connect(path) as db:
        db.executemany("INSERT INTO snapshots VALUES (?, ?, ?, ?)", kept)
    db.close()
    async with open_store(f"sqlite:///{path}") as store:
        with caplog.at_level(logging.WARNING, logger="eventlog.store"):
            reopened = await store.open("s")
        # Its hash is not the stored event's at its seq: a full replay, and the reason given.
        assert reopened.snapshot_fault == (
            f"snapshot at seq {kept[0][1]} not used: its hash is not the stored event's at seq "
            f"{kept[0][1]} (stale or altered)"
        )
        assert reopened.loaded_from == 0 and state_of(reopened) == written
        assert "replaying the whole log" in caplog.text


async def test_a_snapshot_that_cannot_be_written_is_logged_and_ignored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A trigger makes every snapshot insert fail, as a full disk would fail it.
    path = tmp_path / "failing.db"
    async with open_store(f"sqlite:///{path}"):
        pass
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE snapshots (session_id TEXT PRIMARY KEY, seq INTEGER NOT NULL, "
            "hash BLOB NOT NULL, data BLOB NOT NULL)"
        )
        db.execute(
            "CREATE TRIGGER no_room BEFORE INSERT ON snapshots "
            "BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END"
        )
    db.close()
    plans = [TurnPlan(calls=(1,), header=False, queued=False, compact=True)] * 3
    with caplog.at_level(logging.WARNING, logger="eventlog.store"):
        async with open_store(f"sqlite:///{path}", snapshot_every=5) as store:
            written = await write(store, plans, crash=False)
    assert "writing the snapshot at seq" in caplog.text
    assert "database or disk is full" in caplog.text
    # The log is intact and opens by a full replay.
    async with open_store(f"sqlite:///{path}") as store:
        reopened = await store.open("s")
        assert reopened.snapshot_seq is None and state_of(reopened) == written


_CHILD = """
import sys, anyio
from eventlog import open_store
from tests.test_snapshots import TurnPlan, play

async def main(url):
    async with open_store(url, snapshot_every=7) as store:
        session = await store.create(session_id="s")
        turn = 0
        while True:
            turn += 1
            plan = TurnPlan(
                calls=(1, 2), header=turn % 5 == 1, queued=turn % 4 == 0, compact=turn % 3 == 0
            )
            play(session, turn, plan)
            await session.flush()
            print(session.head, flush=True)

anyio.run(main, sys.argv[1])
"""


@pytest.mark.parametrize("flushes", [3, 20, 60])
async def test_a_kill_while_snapshots_are_written_loses_nothing(
    tmp_path: Path, flushes: int
) -> None:
    # A real process writes, compacts and snapshots (every 7 events, and at each compaction
    # every third turn) until it is killed right after its n-th flush returned, while it is
    # already writing the next turn and maybe a snapshot.
    path = tmp_path / "killed.db"
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, f"sqlite:///{path}"],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parent.parent,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
    )
    assert child.stdout is not None
    reported = [child.stdout.readline() for _ in range(flushes)]  # n flushes returned
    assert all(line.strip().isdigit() for line in reported)
    child.send_signal(signal.SIGKILL)
    flushed = [*map(int, reported), *(int(line) for line in child.stdout.read().split())]
    child.stdout.close()
    child.wait()
    async with open_store(f"sqlite:///{path}") as store:
        resumed = await store.open("s")
        assert resumed.snapshot_fault is None  # a kill tears no snapshot: each is one commit
        assert resumed.head >= flushed[-1]
        state = state_of(resumed)
        await resumed.aclose()
        full = await store.open("s", verify="full")
        assert state_of(full) == state


async def test_a_session_that_never_compacts_gets_no_snapshot_until_it_does() -> None:
    # Every message stays on the surface, so a snapshot would hold the whole log again (and an
    # open from it both copies at once): none is written before the session's first
    # compaction. The compaction that shrinks the surface gets one at its flush.
    data = MemoryData()
    async with open_store("memory:", data=data, snapshot_every=10) as store:
        session = await store.create(session_id="chatty")
        for i in range(200):
            session.append(
                "user/message", UserMessage(message=Message.user(f"m{i}")), surface=APPEND
            )
            await session.flush()
    # (Closing the store waits for the snapshot writes in flight.)
    assert "chatty" not in data.snapshots
    async with open_store("memory:", data=data.restarted(), snapshot_every=10) as store:
        session = await store.open("chatty")
        nodes = list(session.surface_index.nodes)
        summary = UserMessage(message=Message.user("a summary of 200 messages"))
        summary_seq = session.append(
            "user/message", summary, surface=Replace(nodes[0], nodes[-1]), sources=nodes
        ).seq
        await session.flush()
    assert data.snapshots["chatty"][0] == summary_seq


class _Tick(msgspec.Struct, frozen=True, kw_only=True):
    """An application's own event: nothing the model sees."""

    n: int


async def test_a_session_of_app_events_only_is_snapshotted_and_opens_from_it() -> None:
    # No surface at all (a LangGraph thread's checkpoints are such events): a snapshot is a
    # few hundred bytes, not a second copy of the log, so one is written every 10 events and
    # the session reopens from it, holding only the events after it.
    types = EventTypes()
    types.register("app/tick", _Tick, ignorable=True)
    data = MemoryData()
    async with open_store("memory:", data=data, snapshot_every=10, types=types) as store:
        session = await store.create(session_id="ticks")
        for n in range(95):
            session.append("app/tick", _Tick(n=n))
            await session.flush()
    assert data.snapshots["ticks"][0] == 89  # seqs 9, 19, ... 89
    async with open_store("memory:", data=data.restarted(), types=types) as store:
        session = await store.open("ticks")
        assert (session.snapshot_seq, session.loaded_from) == (89, 89)
        assert [e.data.n async for e in session.read_events(0)] == list(range(95))
