"""Helpers to property-test crash recovery: generated agent runs, a faulty store, invariants.

- :func:`agent_runs` — a hypothesis strategy of well-formed agent runs (:class:`AgentRun`):
  turns, steps, parallel tool calls with interleaved ``tool/call`` events, out-of-order
  ``tool/outcome``, compaction replaces, inbox splices, cancels; each run knows where the agent
  flushes (its semantic checkpoints, docs/recovery.md).
- :class:`FaultyStore` — wraps any store to fail, or to "crash", at its Nth write.
- :func:`check_invariants` — raises one :class:`InvariantViolation` listing every violated
  invariant of a session (seq contiguity, balanced turns and steps, every tool call answered
  exactly once, provider-valid messages, projections equal to a rebuild).

It needs hypothesis (``pip install 'agent-eventlog[testing]'``).

Property-testing your own agent's crash recovery: crash it at every write, restart, resume,
check. Replace ``run.play(session)`` with your agent driving the session, and ``repair`` with
your agent's resume path::

    import anyio
    from hypothesis import given, strategies as st

    from eventlog import StoreWriteError, open_store
    from eventlog.stores import MemoryData
    from recovery import repair
    from recovery.testing import FaultyStore, agent_runs, check_invariants

    @given(run=agent_runs(), crash_at=st.integers(min_value=0, max_value=30))
    def test_recovers_from_a_crash_at_any_write(run, crash_at):
        async def scenario() -> None:
            disk = MemoryData()
            async with FaultyStore(open_store("memory:", data=disk), crash_at=crash_at) as store:
                session = await store.create(session_id="s")
                try:
                    await run.play(session)  # your agent at work
                except StoreWriteError:
                    pass  # the process "died" here
            async with open_store("memory:", data=disk.restarted()) as store:
                session = await store.open("s")  # the restarted process
                await repair(session)  # your agent's resume path
                await session.load_history()  # the invariants read the whole log
                check_invariants(session)
                assert not (await repair(session)).appended

        anyio.run(scenario)
"""

from eventlog import needs_extra as _needs_extra

with _needs_extra("testing", "recovery.testing", "hypothesis"):
    from ._runs import AgentRun, Choose, PlannedEvent, agent_runs, build_run, random_run
from ._faulty import FaultyBackend, FaultyStore, SimulatedCrash
from ._invariants import InvariantViolation, check_invariants

__all__ = (
    "AgentRun",
    "Choose",
    "FaultyBackend",
    "FaultyStore",
    "InvariantViolation",
    "PlannedEvent",
    "SimulatedCrash",
    "agent_runs",
    "build_run",
    "check_invariants",
    "random_run",
)
