"""Resume keeps the request; retry advice from a ``ModelError`` is followed; generated tool-call
ids stay unique across restarts."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from agent import Agent, ModelError, ModelRequest, Response, RetryPolicy, ScriptedModel
from agent._loop._interrupt import Interrupter
from agent._loop._scripted import ScriptEntry
from eventlog import ToolCallPart, open_store
from tests.agent_children.support import events_of

pytestmark = pytest.mark.anyio


async def run(agent: Agent, text: str) -> str:
    agent.followup(text)
    with anyio.fail_after(10):
        (outcome,) = await agent.run_until_idle()
    return outcome.reason


async def test_resume_keeps_system_model_and_params(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    # A first process runs a turn with a system prompt, a model name and params.
    async with open_store(url) as store:
        session = await store.create(session_id="s")
        first = ScriptedModel([Response(text="one")])
        agent = Agent(
            session, first, system="Be brief.", model_name="m-1", params={"temperature": 0.2}
        )
        assert await run(agent, "hi") == "completed"
        await session.aclose()
    # A new process resumes without repeating them: the next request carries the same ones,
    # and no new request/header is written.
    async with open_store(url) as store:
        again = ScriptedModel([Response(text="two")], name="other")
        agent = await Agent.resume(store, "s", again)
        assert await run(agent, "more") == "completed"
        (request,) = again.requests
        assert (request.system, request.model, dict(request.params)) == (
            "Be brief.",
            "m-1",
            {"temperature": 0.2},
        )
        assert len(events_of(agent.session, "request/header")) == 1
        await agent.session.aclose()
    # Given a different value, the resumed agent uses it and the next header records it.
    async with open_store(url) as store:
        third = ScriptedModel([Response(text="three")])
        agent = await Agent.resume(store, "s", third, system="Be verbose.")
        assert await run(agent, "again") == "completed"
        assert third.requests[0].system == "Be verbose."
        assert third.requests[0].model == "m-1"
        header = events_of(agent.session, "request/header")[-1].data
        assert (header.system, header.model, header.params) == ("Be verbose.", None, None)
        await agent.session.aclose()


async def test_generated_call_ids_are_unique_across_restarts(tmp_path: Path) -> None:
    # A provider that sends no call ids: the agent makes them, in every process anew.
    url = f"sqlite:///{tmp_path / 's.db'}"
    nameless = ToolCallPart(id="", name="missing_tool", arguments="{}")
    ids: list[str] = []
    for _ in range(3):
        async with open_store(url) as store:
            model = ScriptedModel([Response(tool_calls=[nameless]), Response(text="ok")])
            if "s" in {info.id for info in await store.list()}:
                agent = await Agent.resume(store, "s", model)
            else:
                agent = Agent(model=model, session=await store.create(session_id="s"))
            assert await run(agent, "call it") == "completed"
            ids = [
                c.id
                for e in events_of(agent.session, "assistant/message")
                for c in e.data.message.tool_calls
            ]
            await agent.session.aclose()
    assert len(ids) == 3 and len(set(ids)) == 3 and "" not in ids


def raising(error: ModelError) -> ScriptEntry:
    """A script entry whose attempt fails with ``error``."""

    def entry(request: ModelRequest) -> Response:
        raise error

    return entry


async def test_retry_after_and_not_retryable_are_followed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The back-offs the agent takes are recorded instead of slept.
    pauses: list[float] = []

    async def pause(self: Interrupter, seconds: float) -> None:
        pauses.append(seconds)

    monkeypatch.setattr(Interrupter, "pause", pause)

    script: list[ScriptEntry] = [
        raising(ModelError("busy", retry_after=3.0)),
        raising(ModelError("busy")),
        Response(text="fine"),
    ]
    async with open_store("memory:") as store:
        session = await store.create()
        agent = Agent(
            session,
            ScriptedModel(script),
            retry=RetryPolicy(max_retries=3, initial_delay=0.5, jitter=0),
        )
        assert await run(agent, "go") == "completed"
        # The provider's 3 s is waited as asked (Retry-After); then the back-off doubles.
        assert pauses == [3.0, 1.0]
        # A refusal is not retried: one attempt, the turn ends error.
        refused = ScriptedModel([raising(ModelError("HTTP 400", retryable=False))])
        agent = Agent(session, refused, retry=RetryPolicy(max_retries=3))
        assert await run(agent, "go") == "error"
        assert len(refused.requests) == 1
