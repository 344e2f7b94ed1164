"""Crash the agent at every write boundary (in-process, with ``FaultyStore``), restart from
the durable data, resume and finish: every state is valid, no started call is reported as not
started, and the request is admitted exactly once."""

from __future__ import annotations

import pytest

from agent import Agent, ModelRequest, Response, ScriptedModel
from eventlog import StoreWriteError, ToolCallPart, open_store
from eventlog.stores import MemoryData
from recovery import TOOL_NOT_STARTED
from recovery.testing import FaultyStore, check_invariants
from tests.agent_children.support import Probe, Tracker

pytestmark = pytest.mark.anyio


def script(request: ModelRequest) -> Response:
    """Tools after a user message (two parallel reads and a barrier), then a final answer."""
    last = request.messages[-1]
    if last.role == "tool":
        return Response(text="done")
    n = sum(1 for m in request.messages if m.role == "assistant")
    calls = [
        ToolCallPart(id=f"t{n}-read-a", name="safe", arguments="{}"),
        ToolCallPart(id=f"t{n}-read-b", name="safe", arguments="{}"),
        ToolCallPart(id=f"t{n}-write", name="solo", arguments="{}"),
    ]
    return Response(text="working", tool_calls=calls)


async def _first_life(data: MemoryData, tracker: Tracker, crash_at: int | None) -> int:
    """Run until the simulated crash; return how many writes were attempted."""
    tools = [Probe("safe", tracker, safe=True), Probe("solo", tracker, safe=False)]
    async with FaultyStore(open_store("memory:", data=data), crash_at=crash_at) as store:
        session = await store.create(session_id="s")
        try:
            agent = Agent(session, ScriptedModel(script), tools)
            await agent.prompt("fix it", request_id="req-1")
            await agent.run_until_idle()
        except StoreWriteError:
            assert crash_at is not None
        return store.writes


async def _second_life(data: MemoryData, started: set[str]) -> None:
    tools = [Probe("safe", Tracker(), safe=True), Probe("solo", Tracker(), safe=False)]
    async with open_store("memory:", data=data.restarted()) as store:
        agent = await Agent.resume(store, "s", ScriptedModel(script), tools)
        session = agent.session
        check_invariants(session)
        for event in await session.events():
            if event.type == "tool/result" and event.data.error is not None:
                if event.data.error.code in (TOOL_NOT_STARTED, "ABORTED_BEFORE_DISPATCH"):
                    call_id = event.data.message.tool_results[0].call_id
                    assert call_id not in started, f"{call_id} ran but was reported not started"
        # The client retries its request: admitted exactly once, whatever survived.
        await agent.prompt("fix it", request_id="req-1")
        await agent.run_until_idle()
        check_invariants(session)
        users = [e for e in (await session.events()) if e.type == "user/message"]
        assert [e.data.message.text for e in users] == ["fix it"]
        assert (await session.events())[-1].type == "turn/end"
        await session.aclose()


async def test_a_crash_at_every_write_boundary_resumes_and_finishes() -> None:
    total = await _first_life(MemoryData(), Tracker(), crash_at=None)
    assert total >= 5
    for crash_at in range(total + 1):
        data, tracker = MemoryData(), Tracker()
        await _first_life(data, tracker, crash_at)
        try:
            await _second_life(data, set(tracker.starts()))
        except AssertionError as exc:
            raise AssertionError(f"crash at write {crash_at} of {total}: {exc}") from exc
