"""Model retries: the official SDKs' back-off, against a real server that fails or goes away.

The policy's delays are computed (and asserted) with its jitter source fixed; the loop's real
waits use delays scaled down a hundred times, and the agent logs each one it chose, so the tests
check the delays the agent really waited without waiting for long.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator
from typing import Any

import anthropic._constants
import anyio
import openai._constants
import pytest

from agent import Agent, AgentConfigError, RetryPolicy, tool
from agent.models import OpenAIChat
from eventlog import Session
from tests.agent_children.support import events_of
from tests.llm_server import LLMServer, Reply, openai_events

pytestmark = pytest.mark.anyio


@tool
def noop() -> str:
    """Does nothing."""
    return "ok"


@pytest.fixture
def server() -> Iterator[LLMServer]:
    with LLMServer() as server:
        yield server


def chosen_delays(caplog: pytest.LogCaptureFixture) -> list[float | None]:
    """The delays the agent logged choosing, in order (``None``: it gave up)."""
    return [r.retry_delay for r in caplog.records if hasattr(r, "retry_delay")]


async def run_turn(session: Session, url: str, policy: RetryPolicy) -> str:
    async with OpenAIChat("test-model", base_url=url + "/v1", api_key="sk-test") as model:
        agent = Agent(session, model, [noop], retry=policy)
        agent.followup("Go")
        with anyio.fail_after(20):
            (outcome,) = await agent.run_until_idle()
    return outcome.reason


# -- the policy --------------------------------------------------------------------------------


def test_the_default_policy_is_the_official_sdks() -> None:
    # The same numbers as both SDKs' own retry loops (which the adapters turn off).
    policy = RetryPolicy()
    for sdk in (openai._constants, anthropic._constants):
        assert policy.max_retries == sdk.DEFAULT_MAX_RETRIES
        assert policy.initial_delay == sdk.INITIAL_RETRY_DELAY
        assert policy.max_delay == sdk.MAX_RETRY_DELAY
    assert policy.max_retry_after == openai._constants.MAX_RETRY_AFTER_DELAY


def test_back_off_doubles_up_to_the_cap_less_the_jitter() -> None:
    # No jitter drawn: 0.5 s doubling, capped at 8 s; the policy gives up after its retries.
    calm = RetryPolicy(max_retries=6, random=lambda: 0.0)
    assert [calm.delay(n) for n in range(1, 8)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, None]
    # The most jitter: a quarter off each delay.
    edgy = RetryPolicy(max_retries=3, random=lambda: 1.0)
    assert [edgy.delay(n) for n in range(1, 4)] == [0.375, 0.75, 1.5]
    # The real source stays within those bounds.
    for n in range(1, 3):
        delay = RetryPolicy().delay(n)
        assert delay is not None and 0.375 * 2 ** (n - 1) <= delay <= 0.5 * 2 ** (n - 1)
    with pytest.raises(
        AgentConfigError, match=r"RetryPolicy\.delay: retry must be an integer >= 1"
    ):
        calm.delay(0)
    # A policy of many retries does not overflow.
    assert RetryPolicy(max_retries=5000, random=lambda: 0.0).delay(5000) == 8.0


def test_retry_after_is_waited_as_asked_unless_it_is_too_long() -> None:
    policy = RetryPolicy(random=lambda: 0.0)
    assert policy.delay(1, retry_after=3.0) == 3.0  # longer than the back-off: as asked
    assert policy.delay(1, retry_after=0.01) == 0.01  # shorter too, as the SDKs do
    assert policy.delay(1, retry_after=120.0) == 120.0
    assert policy.delay(1, retry_after=121.0) is None  # too long: not retried at all
    assert policy.delay(1, retry_after=0.0) == 0.5  # nothing asked: the back-off
    assert policy.delay(1, retry_after=math.nan) == 0.5
    assert policy.delay(3, retry_after=1.0) is None  # the retries are spent regardless
    assert RetryPolicy(max_retry_after=math.inf).delay(1, retry_after=1e6) == 1e6


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_retries": -1}, "RetryPolicy: max_retries must be an integer >= 0, got int -1"),
        ({"max_retries": True}, "RetryPolicy: max_retries must be an integer >= 0, got bool True"),
        (
            {"initial_delay": "1"},
            "RetryPolicy: initial_delay must be a finite number of seconds >= 0, got str '1'",
        ),
        (
            {"max_delay": math.inf},
            "RetryPolicy: max_delay must be a finite number of seconds >= 0, got float inf",
        ),
        ({"jitter": 1.5}, "RetryPolicy: jitter must be a number from 0 to 1, got float 1.5"),
        (
            {"max_retry_after": math.nan},
            "RetryPolicy: max_retry_after must be seconds >= 0 (or inf), got float nan",
        ),
        (
            {"random": 0.5},
            "RetryPolicy: random must be a function returning a float in [0, 1), got float 0.5",
        ),
    ],
)
def test_a_bad_policy_is_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(AgentConfigError) as caught:
        RetryPolicy(**options)
    assert str(caught.value) == message
    assert isinstance(caught.value, TypeError | ValueError)


# -- the loop, against a real server -----------------------------------------------------------

#: The default policy scaled down a hundred times, with its jitter fixed at half.
SMALL = RetryPolicy(initial_delay=0.005, max_delay=0.08, random=lambda: 0.5)


async def test_a_server_that_went_away_is_retried_with_back_off_then_the_turn_ends_error(
    session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    # A server that was there and is gone: connections are refused.
    gone = LLMServer().start()
    gone.stop()
    caplog.set_level(logging.INFO, logger="agent")
    started = time.monotonic()
    assert await run_turn(session, gone.url, SMALL) == "error"
    elapsed = time.monotonic() - started
    # Three attempts (two retries), each recorded with the transport error.
    errors = [e.data.error for e in events_of(session, "assistant/attempt")]
    assert errors == ["ModelError: openai: APIConnectionError: Connection error. (All connection "
                      "attempts failed)"] * 3  # fmt: skip
    # Waits of 0.005 s and 0.01 s less 12.5 % jitter, then the agent gave up.
    assert chosen_delays(caplog) == [0.004375, 0.00875, None]
    assert caplog.records[-1].getMessage().endswith("; 2 retries spent, the turn ends error")
    assert elapsed >= 0.004375 + 0.00875
    assert events_of(session, "turn/end")[0].data.reason == "error"


async def test_503s_then_a_reply_and_retry_after_honoured(
    server: LLMServer, session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    # Overloaded once without advice, once asking for 30 ms; then the reply comes.
    busy = {"error": {"message": "overloaded"}}
    server.script(
        Reply(body=busy, status=503),
        Reply(body=busy, status=503, headers={"retry-after-ms": "30"}),
        Reply(events=openai_events(text="back")),
    )
    caplog.set_level(logging.INFO, logger="agent")
    assert await run_turn(session, server.url, SMALL) == "completed"
    # The back-off for the first, the server's 30 ms for the second.
    assert chosen_delays(caplog) == [0.004375, 0.03]
    assert [e.data.error for e in events_of(session, "assistant/attempt")] == [
        "ModelError: openai: HTTP 503: overloaded"
    ] * 2
    assert len(server.received) == 3
    assert server.bodies[0] == server.bodies[2]  # the same request each time


async def test_a_retry_after_longer_than_the_policy_allows_is_not_waited(
    server: LLMServer, session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    # The server asks for ten minutes: the turn ends at once rather than hang.
    server.script(
        Reply(body={"error": {"message": "quota"}}, status=429, headers={"retry-after": "600"})
    )
    caplog.set_level(logging.INFO, logger="agent")
    with anyio.fail_after(5):
        assert await run_turn(session, server.url, SMALL) == "error"
    assert chosen_delays(caplog) == [None]
    assert (
        caplog.records[-1]
        .getMessage()
        .endswith(
            "the server asked to wait 600 s, more than the policy's max_retry_after of 120 s: the "
            "turn ends error"
        )
    )
    assert len(server.received) == 1


@pytest.mark.parametrize(("status", "header", "requests"), [(503, "false", 1), (400, "true", 2)])
async def test_x_should_retry_overrides_the_status(
    server: LLMServer, session: Session, status: int, header: str, requests: int
) -> None:
    # The server says whether to retry, whatever its status, as the SDKs obey it.
    server.script(
        Reply(body={"error": {"message": "no"}}, status=status, headers={"x-should-retry": header}),
        Reply(events=openai_events(text="fine")),
    )
    outcome = await run_turn(session, server.url, SMALL)
    assert (outcome, len(server.received)) == (("error", 1) if requests == 1 else ("completed", 2))


async def test_a_cancel_cuts_a_long_back_off_short(server: LLMServer, session: Session) -> None:
    # The server asks for 60 s; the agent is cancelled while it waits.
    server.script(
        Reply(body={"error": {"message": "later"}}, status=429, headers={"retry-after": "60"})
    )
    async with OpenAIChat("test-model", base_url=server.url + "/v1", api_key="k") as model:
        agent = Agent(session, model, retry=RetryPolicy())
        waiting = anyio.Event()
        session.subscribe(lambda e: waiting.set() if e.type == "assistant/attempt" else None)
        agent.followup("Go")
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(agent.run_until_idle)
                await waiting.wait()
                agent.cancel()
    assert events_of(session, "turn/end")[0].data.reason == "aborted"
    assert len(server.received) == 1
