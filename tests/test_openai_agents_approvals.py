"""The SDK's ``needs_approval`` tools on an ``EventlogSession``: a paused run kept across a
restart, decided through the SDK, the session or ``eventlog approve``/``deny``.

Through the SDK's own ``Runner.run`` (on the loopback provider server, or ``agents.testing``'s
``ScriptedModel``). The model asks for two payments at once, ``pay(3)`` (``c1``) and
``pay(4)`` (``c2``); ``pay`` needs approval. In every case: a denied call never runs, an
approved one runs once, a decided one is never asked again, and the model is told each fate.
The restart cases live in child processes (``tests/openai_agents_children/approval.py``): the
one that paused is SIGKILLed, the decision is taken by the ``eventlog`` command in a process of
its own, and a third process resumes the run from the log.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from agents import Agent, Runner, RunResult, UserError, function_tool
from agents.testing import ScriptedModel
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from agent.integrations.openai_agents import SDK_DECIDER, EventlogSession, openai_agents_types
from eventlog import ValidationError, open_store
from eventlog.stores import LogStore
from projections import timeline
from recovery import (
    ApprovalConflictError,
    denied_text,
    not_started_text,
    outcome_unknown_text,
    scan,
)
from tests.llm_server import LLMServer
from tests.openai_agents_children.support import completion

ROOT = Path(__file__).resolve().parent.parent
PAYMENTS = [("c1", "pay", {"amount": 3}), ("c2", "pay", {"amount": 4})]

pytestmark = pytest.mark.anyio


def _call(call_id: str, amount: int) -> ResponseFunctionToolCall:
    arguments = f'{{"amount": {amount}}}'
    return ResponseFunctionToolCall(
        call_id=call_id, name="pay", arguments=arguments, type="function_call"
    )


def _text(text: str) -> ResponseOutputMessage:
    content: list[Any] = [ResponseOutputText(type="output_text", text=text, annotations=[])]
    return ResponseOutputMessage(
        id="msg", type="message", role="assistant", status="completed", content=content
    )


def _payer(paid: list[int], *replies: list[Any]) -> Agent[Any]:
    @function_tool(needs_approval=True)
    def pay(amount: int) -> str:
        """Pay an amount."""
        paid.append(amount)
        return f"paid {amount}"

    return Agent(name="assistant", model=ScriptedModel(list(replies)), tools=[pay])


def _ids(items: list[Any]) -> list[str]:
    """The call ids of SDK approval items."""
    return [getattr(item.raw_item, "call_id", "") for item in items]


def _of(session: EventlogSession, type_: str) -> list[Any]:
    return [e.data for e in session.log.window() if e.type == type_]


def _decisions(session: EventlogSession) -> list[tuple[str, str, str]]:
    return [(d.call_id, d.decision, d.by) for d in _of(session, "tool/approval")]


def _results(session: EventlogSession) -> dict[str, str]:
    found = {}
    for data in _of(session, "tool/result"):
        part = data.message.content[0]
        found[part.call_id] = part.content
    return found


async def _paused(
    store: LogStore, agent: Agent[Any], prompt: str
) -> tuple[EventlogSession, RunResult]:
    """A session ``s`` whose run of ``prompt`` paused for decisions, its interruption saved."""
    session = await EventlogSession.open(store, "s")
    paused = await Runner.run(agent, prompt, session=session, hooks=session.hooks)
    await session.save_interruption(paused)
    return session, paused


async def test_decisions_taken_on_the_sdk_state_are_recorded_before_the_calls_run() -> None:
    paid: list[int] = []
    agent = _payer(paid, [_call("c1", 3), _call("c2", 4)], [_text("Paid 3, not 4.")])
    async with open_store("memory:", types=openai_agents_types()) as store:
        session = await EventlogSession.open(store, "s")
        paused = await Runner.run(agent, "Pay 3 and 4.", session=session, hooks=session.hooks)
        assert _ids(paused.interruptions) == ["c1", "c2"]

        # The pause is kept: one question per call, and the state to resume from.
        waiting = await session.save_interruption(paused)
        assert [(w.call_id, w.arguments) for w in waiting] == [
            ("c1", '{"amount": 3}'),
            ("c2", '{"amount": 4}'),
        ]
        assert [r.call_id for r in _of(session, "tool/approval-request")] == ["c1", "c2"]
        assert _of(session, "openai_agents/run-state")[0].calls == ["c1", "c2"]
        assert scan(session.log).needs_repair is False  # waiting, not broken

        # The app decides on the SDK's state, as the SDK's docs show.
        state = paused.to_state()
        approve, reject = state.get_interruptions()
        state.approve(approve)
        state.reject(reject)
        result = await Runner.run(agent, state, session=session, hooks=session.hooks)

        assert result.final_output == "Paid 3, not 4." and paid == [3]
        assert _decisions(session) == [("c1", "approve", SDK_DECIDER), ("c2", "deny", SDK_DECIDER)]
        # The approval is durable before the call's tool/call: the log never shows it undecided
        # and started.
        types = [e.type for e in session.log.window()]
        assert types.index("tool/approval") < types.index("tool/call")
        assert set(_results(session)) == {"c1", "c2"} and _results(session)["c1"] == "paid 3"
        assert timeline(session.log).turn is None and not timeline(session.log).findings
        # Nothing waits any more.
        assert await session.pending_run(agent) is None
        await session.log.aclose()


async def test_a_call_decided_through_the_session_is_not_asked_again() -> None:
    paid: list[int] = []
    replies: list[list[Any]] = [[_call("c1", 3), _call("c2", 4)], [_text("Paid both.")]]
    agent = _payer(paid, *replies)
    async with open_store("memory:", types=openai_agents_types()) as store:
        session, _ = await _paused(store, agent, "Pay 3 and 4.")

        # Only c1 is decided; the run resumed from the log runs it and pauses again for c2.
        await session.approve("c1", by="ana")
        state = await session.pending_run(agent)
        assert _ids(state.get_interruptions()) == ["c1", "c2"]
        again = await Runner.run(agent, state, session=session, hooks=session.hooks)
        assert paid == [3]
        assert _ids(again.interruptions) == ["c2"]
        waiting = await session.save_interruption(again)
        assert [w.call_id for w in waiting] == ["c2"]
        # c2 was asked once, c1 never again.
        assert [r.call_id for r in _of(session, "tool/approval-request")] == ["c1", "c2"]

        await session.approve("c2", by="bob", reason="checked")
        # Every call decided, the run not resumed yet: it waits for its run, nothing to repair.
        decided = scan(session.log)
        assert decided.awaiting_agent and not decided.needs_repair
        state = await session.pending_run(agent)
        result = await Runner.run(agent, state, session=session, hooks=session.hooks)
        assert result.final_output == "Paid both." and paid == [3, 4]
        assert _decisions(session) == [("c1", "approve", "ana"), ("c2", "approve", "bob")]
        await session.log.aclose()


async def test_a_call_the_log_denied_never_runs_whatever_the_sdk_state_says() -> None:
    paid: list[int] = []
    agent = _payer(paid, [_call("c1", 3)], [_text("Done.")])
    async with open_store("memory:", types=openai_agents_types()) as store:
        session, paused = await _paused(store, agent, "Pay 3.")
        await session.deny("c1", by="ana", reason="over budget")

        # An app that approves on the state it kept in memory, ignoring the log.
        state = paused.to_state()
        state.approve(state.get_interruptions()[0])
        with pytest.raises(UserError) as raised:
            await Runner.run(agent, state, session=session, hooks=session.hooks)
        assert isinstance(raised.value.__cause__, ApprovalConflictError)
        assert paid == []
        assert _decisions(session) == [("c1", "deny", "ana")]
        assert "tool/call" not in [e.type for e in session.log.window()]

        # The state rebuilt from the log carries the denial: the model is told, nothing runs.
        state = await session.pending_run(agent)
        result = await Runner.run(agent, state, session=session, hooks=session.hooks)
        assert result.final_output == "Done." and paid == []
        assert _results(session)["c1"] == denied_text("pay", "c1", "over budget")
        await session.log.aclose()


async def test_a_rejection_on_the_sdk_state_does_not_overturn_the_logs_approval() -> None:
    paid: list[int] = []
    agent = _payer(paid, [_call("c1", 3)], [_text("Paid.")])
    async with open_store("memory:", types=openai_agents_types()) as store:
        session, paused = await _paused(store, agent, "Pay 3.")
        await session.approve("c1", by="ana")
        # A state kept in memory rejects: the run stops at its first call of the session,
        # before the rejection is logged as the call's answer.
        state = paused.to_state()
        state.reject(state.get_interruptions()[0])
        with pytest.raises(ApprovalConflictError):
            await Runner.run(agent, state, session=session, hooks=session.hooks)
        assert paid == [] and _decisions(session) == [("c1", "approve", "ana")]
        assert "c1" not in _results(session)
        await session.log.aclose()


async def test_a_saved_state_that_would_run_a_call_again_is_refused() -> None:
    paid: list[int] = []
    agent = _payer(paid, [_call("c1", 3), _call("c2", 4)], [_text("Paid.")])
    async with open_store("memory:", types=openai_agents_types()) as store:
        session, _ = await _paused(store, agent, "Pay 3 and 4.")
        await session.approve("c1", by="ana")
        again = await Runner.run(
            agent, await session.pending_run(agent), session=session, hooks=session.hooks
        )
        assert paid == [3] and _ids(again.interruptions) == ["c2"]
        # The second pause is not saved: the saved state still holds c1, which has run.
        head = session.log.head
        with pytest.raises(ValidationError, match=r"would run call 'c1'.* again"):
            await session.pending_run(agent)
        assert session.log.head == head and paid == [3]
        # Saving the second pause makes the run resumable again, without c1.
        await session.save_interruption(again)
        await session.deny("c2", by="ana")
        result = await Runner.run(
            agent, await session.pending_run(agent), session=session, hooks=session.hooks
        )
        assert result.final_output == "Paid." and paid == [3]
        await session.log.aclose()


async def test_a_new_run_is_refused_while_a_paused_one_waits() -> None:
    paid: list[int] = []
    agent = _payer(paid, [_call("c1", 3)], [_text("Paid.")])
    async with open_store("memory:", types=openai_agents_types()) as store:
        session, _ = await _paused(store, agent, "Pay 3.")
        head = session.log.head
        # New input would leave c1 asked and unanswered, and send the model a call with no
        # output: refused before the model is called, nothing written.
        with pytest.raises(ValidationError, match=r"waits for a decision on 'c1' \(pay\)"):
            await Runner.run(agent, "Never mind.", session=session, hooks=session.hooks)
        assert session.log.head == head
        # Denied, the paused run resumes: the model is told, and new runs go on after it.
        await session.deny("c1", by="ana")
        state = await session.pending_run(agent)
        result = await Runner.run(agent, state, session=session, hooks=session.hooks)
        assert result.final_output == "Paid." and paid == []
        await session.log.aclose()


async def test_a_run_that_was_not_interrupted_saves_nothing() -> None:
    paid: list[int] = []
    agent = _payer(paid, [_text("Nothing to pay.")])
    async with open_store("memory:", types=openai_agents_types()) as store:
        session = await EventlogSession.open(store, "s")
        result = await Runner.run(agent, "Hello.", session=session, hooks=session.hooks)
        head = session.log.head
        assert await session.save_interruption(result) == ()
        assert session.log.head == head
        assert await session.pending_run(agent) is None
        await session.log.aclose()


def _child(db: str, url: str, marker: Path, life: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "tests.openai_agents_children.approval", db, url]
    return subprocess.run(
        [*argv, str(marker), life], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def _eventlog(db: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "agent.cli", "--db", db, *args]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)


def _paid(marker: Path) -> list[str]:
    return marker.read_text().splitlines() if marker.exists() else []


@pytest.mark.parametrize(
    ("decisions", "paid", "answer"),
    [
        (("approve", "approve"), ["paid 3", "paid 4"], "Paid 3 and 4."),
        (("deny", "deny"), [], "Paid nothing."),
        (("approve", "deny"), ["paid 3"], "Paid 3."),
    ],
    ids=["approved", "denied", "mixed"],
)
def test_a_run_killed_while_it_waits_resumes_on_decisions_from_the_command_line(
    tmp_path: Path, decisions: tuple[str, str], paid: list[str], answer: str
) -> None:
    db = f"sqlite:///{tmp_path / 'sessions.db'}"
    marker = tmp_path / "paid.txt"
    with LLMServer(completion(calls=PAYMENTS), completion(text=answer)) as server:
        # The process that ran the agent kept the pause, then died (SIGKILL) waiting.
        first = _child(db, server.url, marker, "ask")
        assert first.returncode == -signal.SIGKILL, first.stderr
        assert first.stdout.split() == ["c1", "c2"]
        assert _paid(marker) == []

        # A person decides from the command line, in processes of their own.
        pending = _eventlog(db, "approvals", "--pending")
        assert pending.returncode == 0, pending.stderr
        assert "c1" in pending.stdout and "c2" in pending.stdout
        for call_id, decision in zip(("c1", "c2"), decisions, strict=True):
            decided = _eventlog(db, decision, "conversation-1", call_id, "--by", "ana")
            assert decided.returncode == 0, decided.stderr

        # A new process resumes the run from the log alone.
        second = _child(db, server.url, marker, "resume")
        assert second.returncode == 0, second.stderr
        assert second.stdout.strip() == answer
        # Nothing waits any more: a third life finds nothing to resume.
        third = _child(db, server.url, marker, "resume")
        assert third.stdout.strip() == "nothing waits", third.stderr
        bodies = server.bodies

    # Approved bodies ran once; denied ones never (the SDK runs approved bodies together, so
    # in either order).
    assert sorted(_paid(marker)) == sorted(paid)
    # The model's second request answers both calls: a result, or the denial.
    assert len(bodies) == 2
    answers = {
        m["tool_call_id"]: m["content"] for m in bodies[1]["messages"] if m["role"] == "tool"
    }
    for (call_id, _, args), decision in zip(PAYMENTS, decisions, strict=True):
        expected = (
            f"paid {args['amount']}" if decision == "approve" else denied_text("pay", call_id, None)
        )
        assert answers[call_id] == expected
    # The log reads clean to the command: verified, and its audit finds nothing open.
    assert _eventlog(db, "verify", "conversation-1").returncode == 0
    audit = _eventlog(db, "audit", "conversation-1")
    assert audit.returncode == 0, audit.stdout + audit.stderr


def test_an_approved_call_killed_in_its_body_is_never_run_again(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'sessions.db'}"
    marker = tmp_path / "paid.txt"
    with LLMServer(completion(calls=PAYMENTS)) as server:
        first = _child(db, server.url, marker, "ask")
        assert first.returncode == -signal.SIGKILL, first.stderr
        for call_id in ("c1", "c2"):
            decided = _eventlog(db, "approve", "conversation-1", call_id, "--by", "ana")
            assert decided.returncode == 0, decided.stderr
        # The resumed run dies inside the first approved body to run, after its effect (the
        # SDK starts approved calls together: either payment may be the first).
        second = _child(db, server.url, marker, "resume-kill")
        assert second.returncode == -signal.SIGKILL, second.stderr
        paid = _paid(marker)
        assert paid in (["paid 3"], ["paid 4"])
        # The next process repairs the cut turn on open: nothing is left to resume.
        third = _child(db, server.url, marker, "resume")
        assert third.stdout.strip() == "nothing waits", third.stderr
    assert _paid(marker) == paid  # never a second payment, nor the one never started
    ran, other = ("c1", "c2") if paid == ["paid 3"] else ("c2", "c1")

    async def answered() -> dict[str, str]:
        async with open_store(db, types=openai_agents_types()) as store:
            session = await EventlogSession.open(store, "conversation-1")
            found = _results(session)
            assert timeline(session.log).turn is None
            await session.log.aclose()
            return found

    found = anyio.run(answered)
    assert found[ran] == outcome_unknown_text("pay", ran)
    # The other call's tool/call may have been durable before the kill (then it may have run:
    # outcome unknown) or not (never started).
    assert found[other] in (outcome_unknown_text("pay", other), not_started_text("pay", other))
