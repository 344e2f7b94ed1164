"""A run that raises closes its turn with the right reason, and the next run starts a new one.

Through the SDK's own ``Runner.run`` on the loopback provider server, with the session and its
hooks passed as the docs say and nothing more: the SDK tells a session nothing when a run
fails, so the session closes the turn when the next run first calls it (the SDK passes each
run's ``RunContextWrapper``). ``session.guard()`` closes it at once, with the reason the
exception gives.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from agents import (
    Agent,
    MaxTurnsExceeded,
    ModelBehaviorError,
    RunContextWrapper,
    Runner,
    function_tool,
)
from agents.testing import ScriptedModel
from openai import InternalServerError
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from agent.integrations.openai_agents import EventlogSession, openai_agents_types
from eventlog import open_store
from projections import timeline
from recovery import TOOL_OUTCOME_UNKNOWN, outcome_unknown_text, scan
from tests.llm_server import LLMServer, Reply
from tests.openai_agents_children.support import client_for, completion, make_agent

pytestmark = pytest.mark.anyio

#: A provider error: the loopback server answers 500 (the client does not retry).
FAILURE = Reply(body={"error": {"message": "upstream broke"}}, status=500)


def turn_ends(session: EventlogSession) -> list[tuple[int, str]]:
    """Each closed turn, with its reason."""
    return [(e.data.turn, e.data.reason) for e in session.log.window() if e.type == "turn/end"]


def boundaries(session: EventlogSession, start: int = 0) -> list[tuple[str, int, int | None]]:
    """The turn and step boundaries from ``start`` on: (type, turn, step)."""
    return [
        (e.type, e.data.turn, getattr(e.data, "step", None))
        for e in session.log.window(start)
        if e.type in ("turn/start", "turn/end", "step/start", "step/end")
    ]


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


async def test_a_model_error_closes_the_turn_error_and_the_next_run_starts_a_new_one(
    tmp_path: Path,
) -> None:
    replies = [
        completion(calls=[("call_1", "weather", {"city": "Oslo"})]),
        FAILURE,  # the second model call of the first run fails
        completion(text="Hello again."),
    ]
    with LLMServer(*replies) as server:
        client = client_for(server.url)
        agent = make_agent(client, [weather])
        async with open_store(
            f"sqlite:///{tmp_path / 'e.db'}", types=openai_agents_types()
        ) as store:
            session = await EventlogSession.open(store, "s")
            # The first run: the tool runs, then the model call after it fails.
            with pytest.raises(InternalServerError):
                await Runner.run(agent, "Weather in Oslo?", session=session, hooks=session.hooks)
            # Until a next run, the turn is open: the log says a run stopped mid-turn.
            assert scan(session.log).needs_repair
            head = session.log.head

            # The next run closes it `error` and starts turn 2 at step 1.
            result = await Runner.run(agent, "Hi.", session=session, hooks=session.hooks)
            assert result.final_output == "Hello again."
            assert turn_ends(session) == [(1, "error"), (2, "completed")]
            assert boundaries(session, head + 1) == [
                ("step/end", 1, 1), ("turn/end", 1, None),
                ("turn/start", 2, None), ("step/start", 2, 1), ("step/end", 2, 1),
                ("turn/end", 2, None),
            ]  # fmt: skip
            assert not scan(session.log).needs_repair
            # The model's request of the second run holds the first run's answered call.
            roles = [m["role"] for m in server.bodies[2]["messages"]]
            assert roles == ["system", "user", "assistant", "tool", "user"]
            await session.log.aclose()
        await client.close()


async def test_a_first_model_call_that_fails_leaves_no_input_in_the_next_turn(
    tmp_path: Path,
) -> None:
    with LLMServer(FAILURE, completion(text="Here.")) as server:
        client = client_for(server.url)
        agent = make_agent(client, [])
        async with open_store("memory:", types=openai_agents_types()) as store:
            session = await EventlogSession.open(store, "s")
            with pytest.raises(InternalServerError):
                await Runner.run(agent, "First?", session=session, hooks=session.hooks)
            await Runner.run(agent, "Second?", session=session, hooks=session.hooks)
            # Each input sits in its own turn: the failed one closed `error` with no reply.
            assert turn_ends(session) == [(1, "error"), (2, "completed")]
            users = [
                (timeline_turn(session, e.seq), e.data.message.text)
                for e in session.log.window()
                if e.type == "user/message"
            ]
            assert users == [(1, "First?"), (2, "Second?")]
            # The model was still shown both (the SDK's history is the session's items).
            assert [m["role"] for m in server.bodies[1]["messages"]] == ["system", "user", "user"]
            await session.log.aclose()
        await client.close()


def timeline_turn(session: EventlogSession, seq: int) -> int | None:
    """The turn open at ``seq``."""
    turn = None
    for event in session.log.window():
        if event.seq > seq:
            break
        if event.type == "turn/start":
            turn = event.data.turn
        elif event.type == "turn/end":
            turn = None
    return turn


async def test_a_tool_that_raises_is_answered_outcome_unknown_and_its_turn_closed_error(
    tmp_path: Path,
) -> None:
    charged: list[int] = []

    @function_tool(failure_error_function=None)  # the tool's exception ends the run
    def charge(amount: int) -> str:
        """Charge the card."""
        charged.append(amount)
        raise RuntimeError("card service went away mid-charge")

    replies = [completion(calls=[("call_1", "charge", {"amount": 5})]), completion(text="Ok.")]
    with LLMServer(*replies) as server:
        client = client_for(server.url)
        agent = make_agent(client, [charge])
        async with open_store("memory:", types=openai_agents_types()) as store:
            session = await EventlogSession.open(store, "s")
            with pytest.raises(Exception, match="card service went away"):
                await Runner.run(agent, "Charge 5.", session=session, hooks=session.hooks)
            await Runner.run(agent, "Did it go through?", session=session, hooks=session.hooks)
            assert turn_ends(session) == [(1, "error"), (2, "completed")]
            # The call may have acted: the model is told so, not left with a bare call.
            request = server.bodies[1]["messages"]
            assert [m["role"] for m in request] == ["system", "user", "assistant", "tool", "user"]
            assert request[3]["content"] == outcome_unknown_text("charge", "call_1")
            results = [e for e in session.log.window() if e.type == "tool/result"]
            assert results[0].data.error is not None
            assert results[0].data.error.code == TOOL_OUTCOME_UNKNOWN
            assert charged == [5]
            await session.log.aclose()
        await client.close()


async def test_a_run_whose_task_is_cancelled_closes_aborted(tmp_path: Path) -> None:
    started = anyio.Event()

    @function_tool
    async def wait_for_approval(ticket: str) -> str:
        """Wait until a person approves the ticket."""
        started.set()
        await anyio.sleep_forever()
        return "approved"

    replies = [completion(calls=[("call_1", "wait_for_approval", {"ticket": "T-1"})])]
    with LLMServer(*replies, completion(text="Cancelled, then.")) as server:
        client = client_for(server.url)
        agent = make_agent(client, [wait_for_approval])
        async with open_store("memory:", types=openai_agents_types()) as store:
            session = await EventlogSession.open(store, "s")

            async def run() -> None:
                await Runner.run(agent, "File T-1.", session=session, hooks=session.hooks)

            # The run in a task of its own, cancelled while its tool waits.
            async with anyio.create_task_group() as group:
                group.start_soon(run)
                await started.wait()
                group.cancel_scope.cancel()
            await Runner.run(agent, "Where are we?", session=session, hooks=session.hooks)
            assert turn_ends(session) == [(1, "aborted"), (2, "completed")]
            assert server.bodies[1]["messages"][3]["content"] == outcome_unknown_text(
                "wait_for_approval", "call_1"
            )
            await session.log.aclose()
        await client.close()


async def test_guard_closes_at_once_with_the_reason_of_the_exception(tmp_path: Path) -> None:
    started = anyio.Event()

    @function_tool
    async def slow(query: str) -> str:
        """Look something up, slowly."""
        started.set()
        await anyio.sleep_forever()
        return query

    calls = [("call_1", "slow", {"query": "q"})]
    with LLMServer(completion(calls=calls)) as server:
        client = client_for(server.url)
        agent = make_agent(client, [slow])
        async with open_store("memory:", types=openai_agents_types()) as store:
            session = await EventlogSession.open(store, "s")
            # A cancel scope around the run, in the task that goes on: guard sees it.
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as group:
                    group.start_soon(_cancel_when, started, scope)
                    async with session.guard():
                        await Runner.run(agent, "Look q up.", session=session, hooks=session.hooks)
            assert scope.cancelled_caught
            assert turn_ends(session) == [(1, "aborted")]
            assert not scan(session.log).needs_repair

            # MaxTurnsExceeded: a limit stopped the run, its turn ends `blocked`.
            fast = make_agent(client, [weather])
            server.script(completion(calls=[("call_2", "weather", {"city": "Rome"})]))
            with pytest.raises(MaxTurnsExceeded):
                async with session.guard():
                    await Runner.run(
                        fast, "Rome?", session=session, hooks=session.hooks, max_turns=1
                    )
            assert turn_ends(session) == [(1, "aborted"), (2, "blocked")]
            assert timeline(session.log).turn is None
            await session.log.aclose()
        await client.close()


async def _cancel_when(started: anyio.Event, scope: anyio.CancelScope) -> None:
    await started.wait()
    scope.cancel()


async def test_input_added_outside_a_run_is_not_a_cut_run(tmp_path: Path) -> None:
    with LLMServer(completion(text="Both noted.")) as server:
        client = client_for(server.url)
        agent = make_agent(client, [])
        async with open_store("memory:", types=openai_agents_types()) as store:
            session = await EventlogSession.open(store, "s")
            # An app queues input of its own: it waits for a run, nothing needs repair.
            await session.add_items([{"role": "user", "content": "Remember: blue."}])
            assert not scan(session.log).needs_repair
            # The run that answers it opens the turn with its own input.
            await Runner.run(agent, "Noted?", session=session, hooks=session.hooks)
            assert turn_ends(session) == [(1, "completed")]
            assert [m["role"] for m in server.bodies[0]["messages"]] == ["system", "user", "user"]
            await session.log.aclose()
        await client.close()


async def test_a_run_cut_before_its_first_reply_is_repaired_on_open(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'e.db'}"
    async with open_store(url, types=openai_agents_types()) as store:
        session = await EventlogSession.open(store, "s")
        # What a process killed during a run's first model call leaves: the run's input (the
        # Runner passes its RunContextWrapper), durable, in a turn of its own; no reply.
        await session.add_items(
            [{"role": "user", "content": "Book it."}], wrapper=RunContextWrapper(context=None)
        )
        assert scan(session.log).needs_repair  # honest: a run never got its answer
        await session.log.aclose()
    async with open_store(url, types=openai_agents_types()) as store:
        again = await EventlogSession.open(store, "s")
        # Closed by recovery on open: nothing was owed but the turn's end.
        assert turn_ends(again) == [(1, "interrupted")]
        assert await again.get_items() == [{"role": "user", "content": "Book it."}]
        await again.log.aclose()


async def test_a_streamed_run_that_raises_is_closed_by_the_next_run() -> None:
    # The SDK's own scripted model: the first call raises ModelBehaviorError, the next replies.
    reply = ResponseOutputMessage(
        id="msg_1",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text="Fine.", annotations=[])],
    )
    model = ScriptedModel([ModelBehaviorError("the model produced nonsense"), [reply]])
    agent = Agent(name="assistant", instructions="Be brief.", model=model)
    async with open_store("memory:", types=openai_agents_types()) as store:
        session = await EventlogSession.open(store, "s")
        # A streamed run: the SDK writes the session from a task of its own.
        streamed = Runner.run_streamed(agent, "Hello?", session=session, hooks=session.hooks)
        with pytest.raises(ModelBehaviorError):
            async for _ in streamed.stream_events():
                pass
        result = await Runner.run(agent, "Still there?", session=session, hooks=session.hooks)
        assert result.final_output == "Fine."
        assert turn_ends(session) == [(1, "error"), (2, "completed")]
        assert await session.get_items() == [
            {"role": "user", "content": "Hello?"},
            {"role": "user", "content": "Still there?"},
            reply.model_dump(exclude_unset=True),
        ]
        await session.log.aclose()


async def test_without_hooks_only_a_run_with_no_reply_is_known_to_have_failed() -> None:
    def text(words: str) -> ResponseOutputMessage:
        return ResponseOutputMessage(
            id="msg",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text=words, annotations=[])],
        )

    model = ScriptedModel([ModelBehaviorError("nonsense"), [text("One.")], [text("Two.")]])
    agent = Agent(name="assistant", instructions="Be brief.", model=model)
    async with open_store("memory:", types=openai_agents_types()) as store:
        session = await EventlogSession.open(store, "s")
        # No hooks: a run that got no reply is known to have failed.
        with pytest.raises(ModelBehaviorError):
            await Runner.run(agent, "Zero?", session=session)
        await Runner.run(agent, "One?", session=session)
        assert turn_ends(session) == [(1, "error")]
        # Its success unseen, a run with a reply is closed `completed` by the next input.
        await Runner.run(agent, "Two?", session=session)
        assert turn_ends(session) == [(1, "error"), (2, "completed")]
        await session.log.aclose()


async def test_a_run_resumed_after_an_approval_is_not_taken_for_a_new_one() -> None:
    paid: list[int] = []

    @function_tool(needs_approval=True)
    def pay(amount: int) -> str:
        """Pay an amount."""
        paid.append(amount)
        return "paid"

    call = ResponseFunctionToolCall(
        call_id="c1", name="pay", arguments='{"amount": 3}', type="function_call"
    )
    done = ResponseOutputMessage(
        id="msg",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text="Paid.", annotations=[])],
    )
    agent = Agent(name="assistant", model=ScriptedModel([[call], [done]]), tools=[pay])
    async with open_store("memory:", types=openai_agents_types()) as store:
        session = await EventlogSession.open(store, "s")
        paused = await Runner.run(agent, "Pay 3.", session=session, hooks=session.hooks)
        # The run returns interrupted for approval (no on_agent_end): its turn stays open.
        state = paused.to_state()
        state.approve(paused.interruptions[0])
        # The resumed run has a copy of the paused run's context, a new object: the session
        # sees the decision on the awaited call and carries the turn on.
        result = await Runner.run(agent, state, session=session, hooks=session.hooks)
        assert result.final_output == "Paid." and paid == [3]
        assert turn_ends(session) == [(1, "completed")]
        assert [e.type for e in session.log.window()].count("tool/result") == 1
        await session.log.aclose()
