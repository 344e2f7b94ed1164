"""A hypothesis state machine over approve / deny / crash / resume, against a model of the fates.

Every turn the model proposes the same three calls: ``ga`` and ``gb`` (their tool needs a
decision) and ``f`` (needs none). Rules prompt a new turn, decide a waiting call, or run the
agent; any of them may "crash" at a chosen write (``FaultyStore``: the process dies there, the
crashing write landing or not), and every rule starts from the durable data as a new process
would (``Agent.resume``). The model records what was asked, what was decided durably and which
bodies began; after every rule the durable log must agree:

- a call is asked about at most once, and decided at most once, as the model says;
- a guarded body begins only after a durable ``approve``; a denied one never begins;
- no body begins twice;
- a step with an undecided question is ``awaiting approval``, never needs repair;
- a closed turn answers each call by its fate: denied -> ``TOOL_DENIED``; approved -> its
  result (its body ran), or ``TOOL_OUTCOME_UNKNOWN`` (its ``tool/call`` was durable when the
  process died); never decided (the question was not durable) -> ``TOOL_NOT_STARTED``, never
  run.
"""

from __future__ import annotations

from typing import Any

import anyio
from hypothesis import note, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from agent import Agent, ModelRequest, Response, ScriptedModel, tool
from eventlog import Event, SessionNotFoundError, StoreWriteError, ToolCallPart, open_store
from eventlog.stores import MemoryData
from recovery import TOOL_DENIED, TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN, scan
from recovery.testing import FaultyStore, check_invariants

GUARDED = ("ga", "gb")


def _reply(request: ModelRequest) -> Response:
    if request.messages and request.messages[-1].role == "tool":
        return Response(text="done")
    turn = sum(1 for m in request.messages if m.role == "user")
    return Response(
        tool_calls=[
            ToolCallPart(id=f"t{turn}-ga", name="guarded", arguments="{}"),
            ToolCallPart(id=f"t{turn}-f", name="free", arguments="{}"),
            ToolCallPart(id=f"t{turn}-gb", name="guarded", arguments="{}"),
        ]
    )


class ApprovalMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.data = MemoryData()
        self.began: list[str] = []  # bodies begun, by call id, in order
        self.asked: set[str] = set()  # questions known durable
        self.decided: dict[str, str] = {}  # durable decisions
        self.turns = 0
        self.events: list[Event] = []

    def _tools(self) -> list[Any]:
        @tool(approval=True)
        def guarded(context: Any) -> str:
            """Needs a decision."""
            self.began.append(context.call_id)
            return "guarded ran"

        @tool
        def free(context: Any) -> str:
            """Needs none."""
            self.began.append(context.call_id)
            return "free ran"

        return [guarded, free]

    async def _life(self, crash_at: int | None, after: bool, act: Any) -> None:
        store = FaultyStore(
            open_store("memory:", data=self.data.restarted()),
            crash_at=crash_at,
            crash_after_write=after,
        )
        async with store:
            model = ScriptedModel(_reply)
            try:
                try:
                    agent = await Agent.resume(store, "s", model, self._tools())
                except SessionNotFoundError:
                    agent = Agent(await store.create(session_id="s"), model, self._tools())
                await act(agent)
            except StoreWriteError:
                assert crash_at is not None  # the simulated process died here
        self.data = self.data.restarted()

    def _waiting(self) -> list[str]:
        return [e.data.call_id for e in self._requests() if e.data.call_id not in self._decisions()]

    def _requests(self) -> list[Event]:
        return [e for e in self.events if e.type == "tool/approval-request"]

    def _decisions(self) -> dict[str, str]:
        return {e.data.call_id: e.data.decision for e in self.events if e.type == "tool/approval"}

    def _open(self) -> bool:
        return any(e.type == "turn/start" for e in self.events) and self.events[-1].type != (
            "turn/end"
        )

    crashes = st.one_of(st.none(), st.integers(0, 4))

    @precondition(lambda self: not self._open())
    @rule(crash_at=crashes, after=st.booleans())
    def prompt_and_run(self, crash_at: int | None, after: bool) -> None:
        self.turns += 1
        note(f"turn {self.turns}: prompt and run, crash at write {crash_at} (lands: {after})")

        async def act(agent: Agent) -> None:
            await agent.prompt(f"turn {self.turns}", request_id=f"r{self.turns}")
            await agent.run_until_idle()

        anyio.run(self._life, crash_at, after, act)

    @precondition(lambda self: bool(self._waiting()))
    @rule(
        which=st.sampled_from(GUARDED),
        decision=st.sampled_from(["approve", "deny"]),
        crash=st.booleans(),
        after=st.booleans(),
    )
    def decide(self, which: str, decision: str, crash: bool, after: bool) -> None:
        waiting = self._waiting()
        call_id = next((c for c in waiting if c.endswith(which)), waiting[0])
        note(f"{decision} {call_id}, crash: {crash} (lands: {after})")

        async def act(agent: Agent) -> None:
            if decision == "approve":
                await agent.approve(call_id, by="machine")
            else:
                await agent.deny(call_id, by="machine", reason="no")

        anyio.run(self._life, 0 if crash else None, after, act)
        if not crash or after:
            self.decided[call_id] = decision  # the model: durable unless the write was lost

    @precondition(lambda self: self._open())
    @rule(crash_at=crashes, after=st.booleans())
    def resume_and_run(self, crash_at: int | None, after: bool) -> None:
        note(f"resume and run, crash at write {crash_at} (lands: {after})")

        async def act(agent: Agent) -> None:
            await agent.run_until_idle()

        anyio.run(self._life, crash_at, after, act)

    async def _read(self) -> list[Event]:
        async with open_store("memory:", data=self.data.restarted()) as store:
            try:
                session = await store.open("s")
            except SessionNotFoundError:
                return []
            try:
                view = scan(session)
                if view.awaiting_approval:
                    assert not view.needs_repair
                if not view.needs_repair:
                    check_invariants(session)
                return list(await session.events())
            finally:
                await session.aclose()

    @invariant()
    def the_log_agrees_with_the_model(self) -> None:
        self.events = anyio.run(self._read)
        asked = [e.data.call_id for e in self._requests()]
        assert len(asked) == len(set(asked)), f"asked twice: {asked}"
        decisions = [e.data.call_id for e in self.events if e.type == "tool/approval"]
        assert len(decisions) == len(set(decisions)), f"decided twice: {decisions}"
        assert self._decisions() == self.decided
        assert len(self.began) == len(set(self.began)), f"a body began twice: {self.began}"
        for call_id in self.began:
            if call_id.endswith(GUARDED):
                assert self.decided.get(call_id) == "approve", f"{call_id} ran undecided/denied"
        self._check_fates()

    def _check_fates(self) -> None:
        for e in self.events:
            if e.type != "tool/result":
                continue
            call_id = e.data.message.tool_results[0].call_id
            code = e.data.error.code if e.data.error else None
            if not call_id.endswith(GUARDED):
                continue
            fate = self.decided.get(call_id)
            if fate == "deny":
                assert code == TOOL_DENIED, (call_id, code)
            elif fate == "approve":
                # Unknown when its tool/call was durable and the crash came before its result
                # (the body may not have begun: a durable start is all recovery can know).
                assert code in (None, TOOL_OUTCOME_UNKNOWN), (call_id, code)
                if code is None:
                    assert call_id in self.began, f"{call_id} has a result, its body never ran"
            else:
                assert code == TOOL_NOT_STARTED and call_id not in self.asked, (call_id, code)
        self.asked |= {e.data.call_id for e in self._requests()}


TestApprovalMachine = ApprovalMachine.TestCase
TestApprovalMachine.settings = settings(TestApprovalMachine.settings, stateful_step_count=10)
