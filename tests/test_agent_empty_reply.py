"""An empty model reply (a normal finish with no text and no tool calls) is a failed attempt.

As the DeepSeek harness does (its ``EMPTY_RESPONSE``), the agent records it as a log-only
``assistant/attempt`` saying why and retries it under the same policy as any failure; if the
model stays empty the turn ends ``error``, never ``completed`` with nothing said.
"""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest

from agent import Agent, Response, RetryPolicy, ScriptedModel
from agent.models import OpenAIChat
from eventlog import Session
from projections import messages
from recovery import scan
from recovery.testing import check_invariants
from tests.agent_children.support import events_of
from tests.llm_server import LLMServer, Reply, openai_events

pytestmark = pytest.mark.anyio

NO_WAIT = RetryPolicy(initial_delay=0)
EMPTY = "empty reply: the model finished 'stop' with no text and no tool calls"


async def run(agent: Agent, text: str = "Hi") -> str:
    agent.followup(text)
    with anyio.fail_after(10):
        (outcome,) = await agent.run_until_idle()
    return outcome.reason


@pytest.fixture
def server() -> Iterator[LLMServer]:
    with LLMServer() as server:
        yield server


async def test_an_empty_reply_is_recorded_and_retried(session: Session) -> None:
    # The first reply says nothing; the retry answers.
    model = ScriptedModel([Response(), Response(text="Hello.")])
    assert await run(Agent(session, model, retry=NO_WAIT)) == "completed"
    # The empty attempt is in the log, saying why; the model never sees it.
    (attempt,) = events_of(session, "assistant/attempt")
    assert (attempt.data.step, attempt.data.error) == (1, EMPTY)
    assert [m.text for m in messages(session)] == ["Hi", "Hello."]
    # The retry sent the same request again.
    assert model.requests[0].messages == model.requests[1].messages


async def test_a_model_that_stays_empty_ends_the_turn_error(session: Session) -> None:
    # Empty every time: the first attempt and both retries.
    model = ScriptedModel([Response()] * 3)
    assert await run(Agent(session, model, retry=NO_WAIT)) == "error"
    assert [e.data.error for e in events_of(session, "assistant/attempt")] == [EMPTY] * 3
    assert events_of(session, "assistant/message") == []
    # The log is balanced and healthy: a turn that ended honestly, not a damaged one.
    assert scan(session).clean
    check_invariants(session)


@pytest.mark.parametrize(
    ("empty", "error"),
    [
        (Response(text="  \n "), EMPTY),
        (
            Response(reasoning="Hmm."),
            EMPTY + " (only 4 characters of reasoning)",
        ),
        (
            Response(finish="tool-calls"),
            "empty reply: the model finished 'tool-calls' with no text and no tool calls",
        ),
    ],
    ids=["blank-text", "reasoning-only", "tool-calls-finish-without-calls"],
)
async def test_what_counts_as_empty(session: Session, empty: Response, error: str) -> None:
    model = ScriptedModel([empty, Response(text="Now something.")])
    assert await run(Agent(session, model, retry=NO_WAIT)) == "completed"
    assert [e.data.error for e in events_of(session, "assistant/attempt")] == [error]


async def test_an_empty_reply_after_tools_is_retried_in_its_step(session: Session) -> None:
    # Step 1 calls a tool; step 2 first comes back empty, then answers.
    def ping() -> str:
        """Answers pong."""
        return "pong"

    model = ScriptedModel(
        [Response(tool_calls=[("ping", "{}")]), Response(), Response(text="It said pong.")]
    )
    assert await run(Agent(session, model, [ping], retry=NO_WAIT)) == "completed"
    (attempt,) = events_of(session, "assistant/attempt")
    assert (attempt.data.step, attempt.data.error) == (2, EMPTY)
    assert messages(session)[-1].text == "It said pong."


async def test_max_tokens_with_nothing_visible_still_ends_max_tokens(session: Session) -> None:
    # Cut by the token limit before any text: an honest max-tokens, not an empty retry.
    model = ScriptedModel([Response(finish="max-tokens")])
    assert await run(Agent(session, model, retry=NO_WAIT)) == "max-tokens"
    (attempt,) = events_of(session, "assistant/attempt")
    assert attempt.data.error is None
    assert len(model.requests) == 1


async def test_no_retries_means_an_empty_reply_ends_the_turn(session: Session) -> None:
    model = ScriptedModel([Response(), Response(text="never asked")])
    agent = Agent(session, model, retry=RetryPolicy(max_retries=0))
    assert await run(agent) == "error"
    assert len(model.requests) == 1


async def test_an_empty_stream_from_a_real_server_is_retried(
    server: LLMServer, session: Session
) -> None:
    # The OpenAI SDK reads a completion that finishes "stop" without content, then a real one.
    server.script(
        Reply(events=openai_events(text="")), Reply(events=openai_events(text="Recovered."))
    )
    async with OpenAIChat("test-model", base_url=server.url + "/v1", api_key="k") as model:
        assert await run(Agent(session, model, retry=NO_WAIT)) == "completed"
    (attempt,) = events_of(session, "assistant/attempt")
    assert attempt.data.error == EMPTY
    assert messages(session)[-1].text == "Recovered."
    assert len(server.received) == 2
