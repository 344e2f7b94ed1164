"""Recovery properties: a crash at any event boundary and at any write, repaired, is valid."""

from __future__ import annotations

import textwrap
from typing import Any

import anyio
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

import recovery.testing
from eventlog import Session, StoreWriteError, open_store
from eventlog.stores import MemoryData
from recovery import repair, scan
from recovery.testing import (
    AgentRun,
    FaultyStore,
    SimulatedCrash,
    agent_runs,
    check_invariants,
    random_run,
)

pytestmark = pytest.mark.anyio

#: Each example of the per-write tests replays its run once per write index: a quarter of the
#: profile's examples keeps them in step with the others (10 by default, 500 under soak).
PER_WRITE_EXAMPLES = max(1, settings().max_examples // 4)


def planned(run: AgentRun, stop: int) -> list[tuple[Any, ...]]:
    return [(e.type, e.data, e.surface, e.sources) for e in run.events[:stop]]


def stored(session: Session) -> list[tuple[Any, ...]]:
    return [(e.type, e.data, e.surface, e.sources) for e in session.window(0)]


async def repaired_and_valid(session: Session, run: AgentRun, kept: int) -> None:
    """Repair appends closers after the kept prefix, yields a valid log, and is idempotent."""
    report = await repair(session)  # from a snapshot, when the reopened log has one
    await session.load_history()  # the checks below read the whole log
    assert stored(session)[:kept] == planned(run, kept)  # repair never rewrites history
    assert report.appended == tuple(range(kept, session.head + 1))
    check_invariants(session)
    assert (await repair(session)).appended == ()


@given(run=agent_runs())
async def test_every_generated_run_is_valid_as_played(run: AgentRun) -> None:
    async with open_store("memory:") as store:
        session = await store.create()
        await run.play(session)
        check_invariants(session)
        assert scan(session).clean


@given(run=agent_runs())
async def test_a_crash_at_every_event_boundary_repairs_to_a_valid_log(run: AgentRun) -> None:
    note(repr(run))
    async with open_store("memory:") as store:
        for kept in range(len(run) + 1):
            note(f"crash after {kept} events")
            session = await store.create()
            run.commit(session, kept)
            await repaired_and_valid(session, run, kept)


async def count_writes(run: AgentRun) -> int:
    async with FaultyStore(open_store("memory:")) as store:
        session = await store.create(session_id="s")
        await run.play(session)
        return store.writes


async def crash_and_recover(run: AgentRun, crash_at: int, *, after_write: bool) -> None:
    disk = MemoryData()
    flushed = -1

    def on_flush(durable: int) -> None:
        nonlocal flushed
        flushed = durable

    faulty = FaultyStore(
        open_store("memory:", data=disk), crash_at=crash_at, crash_after_write=after_write
    )
    async with faulty as store:
        session = await store.create(session_id="s")
        with pytest.raises(StoreWriteError) as crash:
            await run.play(session, on_flush=on_flush)
        assert isinstance(crash.value.__cause__, SimulatedCrash)
    async with open_store("memory:", data=disk.restarted()) as reopened:
        session = await reopened.open("s")
        where = f"crash at write {crash_at} (after: {after_write}), flushed up to {flushed}"
        assert session.head >= flushed, f"{where}: lost seqs {session.head + 1}..{flushed}"
        await repaired_and_valid(session, run, session.head + 1)


@settings(max_examples=PER_WRITE_EXAMPLES)
@given(run=agent_runs())
async def test_a_crash_at_every_write_index_repairs_to_a_valid_log(run: AgentRun) -> None:
    writes = await count_writes(run)
    note(f"{writes} writes")
    for crash_at in range(writes):
        for after_write in (False, True):
            await crash_and_recover(run, crash_at, after_write=after_write)


@settings(max_examples=PER_WRITE_EXAMPLES)
@given(run=agent_runs(), failures=st.integers(1, 3))
async def test_a_failed_write_at_every_index_loses_nothing(run: AgentRun, failures: int) -> None:
    writes = await count_writes(run)
    for fail_at in range(writes):
        disk = MemoryData()
        faulty = FaultyStore(open_store("memory:", data=disk), fail_at=fail_at, failures=failures)
        async with faulty as store:
            session = await store.create(session_id="s")
            errors = 0
            while True:
                try:
                    await run.play(session)  # resumes after the last committed event
                    break
                except StoreWriteError:
                    errors += 1  # the agent retries the flush; nothing was dropped
            assert errors >= 1 and session.durable == session.head == len(run) - 1
        async with open_store("memory:", data=disk.restarted()) as store:
            again = await store.open("s")
            await again.load_history()  # the checks below read the whole log
            assert stored(again) == planned(run, len(run))
            check_invariants(again)
            assert (await repair(again)).appended == ()


def test_a_crash_before_the_first_write_keeps_an_empty_log() -> None:
    async def scenario() -> None:
        await crash_and_recover(random_run(7), 0, after_write=False)

    anyio.run(scenario)


def test_the_documented_example_runs() -> None:
    doc = recovery.testing.__doc__
    assert doc is not None
    code = doc.split("::\n", 1)[1]
    namespace: dict[str, Any] = {}
    exec(compile(textwrap.dedent(code), "recovery.testing docstring", "exec"), namespace)
    test = namespace["test_recovers_from_a_crash_at_any_write"]
    settings(max_examples=10)(test)()
