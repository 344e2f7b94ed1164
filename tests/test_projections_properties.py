"""Properties of every projection over random well-formed agent histories (docs/architecture.md).

A history is interpreted from drawn operations: whole turns (inbox claims, steps with tool
calls whose ``tool/call`` and ``tool/outcome`` events interleave in any order, results in the
model's order), inbox submissions and cancels, compactions (``Replace`` over a balanced span),
tool-result pruning, and deliberately bad replaces. After every event (or every few events, to
exercise a catch-up over several) we check:

- the state read incrementally equals a fold over the log so far, for surface, messages,
  inbox, timeline and the request header in force;
- every view read earlier still shows what it showed then;
- a refused append leaves every projection unchanged;
- whenever no tool call is open, the history converts to valid OpenAI and Anthropic requests.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import event, given, note
from hypothesis import strategies as st

from eventlog import (
    APPEND,
    AssistantMessage,
    EventLogError,
    Message,
    ReasoningPart,
    Replace,
    RequestHeader,
    Session,
    StepEnd,
    StepStart,
    TextPart,
    ToolCall,
    ToolCallPart,
    ToolOutcome,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
    open_store,
)
from eventlog._surface import fold_surface
from projections import (
    Inbox,
    inbox,
    messages,
    request_header,
    surface,
    timeline,
    to_anthropic,
    to_openai,
)
from projections.base import fold
from projections.inbox import INBOX, cancel, claim, enqueue
from tests.test_projections_formats import check_anthropic, check_openai
from tests.test_surface import reads

pytestmark = pytest.mark.anyio

KINDS = ["turn", "turn", "enqueue", "cancel", "compact", "prune", "bad", "noise"]
operations = st.lists(
    st.tuples(st.sampled_from(KINDS), st.integers(0, 2**31), st.integers(0, 2**31)),
    min_size=2,
    max_size=14,
)


class History:
    """Appends events one at a time and checks every projection after each."""

    def __init__(self, session: Session, read_every: int) -> None:
        self.session = session
        self.read_every = read_every
        self.turn = 0
        self.held: list[tuple[Any, Any]] = []  # (view, what it showed when read)

    # -- the checks ---------------------------------------------------------------------------

    def commit(self, type_: str, data: Any, **kw: Any) -> int:
        seq = self.session.append(type_, data, **kw).seq
        note(f"{seq}: {type_} {kw.get('surface')!r}")
        if seq % self.read_every == 0:
            self.check()
        return seq

    def check(self) -> None:
        session = self.session
        events = list(session.window(0))
        view = surface(session)
        rebuilt = fold_surface(events, session_id=session.id)
        assert list(view) == rebuilt.nodes
        assert view.generation == rebuilt.generation
        history = messages(session)
        assert history == messages(session, at=session.head)
        queued = inbox(session)
        assert queued == fold(INBOX, events).view()
        assert timeline(session) == timeline(session, at=session.head)
        assert request_header(session) == request_header(session, at=session.head)
        self.held += [
            (view, tuple(view)),
            (history, tuple(history)),
            (queued, (queued.next_turn, queued.next_step, queued.requests())),
        ]
        if view.open_calls_before(len(view)) == 0:
            check_openai(to_openai(history))
            check_anthropic(to_anthropic(history))

    def check_held(self) -> None:
        for view, shown in self.held:
            if isinstance(view, Inbox):
                assert (view.next_turn, view.next_step, view.requests()) == shown
            else:
                assert tuple(view) == shown

    def refused(self, type_: str, data: Any, **kw: Any) -> bool:
        """Try an append; when it is refused, prove nothing changed. True if it committed."""
        before = reads(self.session)
        try:
            self.commit(type_, data, **kw)
        except EventLogError:
            assert reads(self.session) == before
            return False
        return True

    # -- the operations -----------------------------------------------------------------------

    def run(self, kind: str, a: int, b: int) -> None:
        getattr(self, "op_" + kind)(a, b)

    def op_turn(self, a: int, b: int) -> None:
        rng = random.Random(a * 7919 + b)
        self.turn += 1
        turn = self.turn
        self.commit("turn/start", TurnStart(turn=turn))
        if not self.claim_into_messages("next-turn"):
            self.commit("user/message", UserMessage(message=Message.user("go")), surface=APPEND)
        for step in range(1, rng.randint(1, 3) + 1):
            self.commit("step/start", StepStart(turn=turn, step=step))
            self.claim_into_messages("next-step")
            self.step(rng, turn, step)
            self.commit("step/end", StepEnd(turn=turn, step=step))
            if rng.random() < 0.3:
                self.op_compact(rng.randrange(2**31), rng.randrange(2**31))
        self.commit("turn/end", TurnEnd(turn=turn, reason="completed"))

    def claim_into_messages(self, target: Any) -> bool:
        taken = claim(inbox(self.session), target)
        for payload in taken.splices:
            self.commit("agent/inbox/spliced", payload)
        for item in taken.items:
            self.commit("user/message", UserMessage(message=item.message), surface=APPEND)
        return bool(taken.items)

    def step(self, rng: random.Random, turn: int, step: int) -> None:
        ids = [f"c{turn}.{step}.{i}" for i in range(rng.randint(0, 3))]
        parts: list[Any] = []
        if rng.random() < 0.5:
            parts.append(ReasoningPart(text="hmm", signature=rng.choice([None, "sig"])))
        if rng.random() < 0.6:
            parts.append(TextPart(text="working"))
        parts += [ToolCallPart(id=i, name="t", arguments='{"k": 1}') for i in ids]
        message = Message(id=f"m{turn}.{step}", role="assistant", content=tuple(parts))
        data = AssistantMessage(turn=turn, step=step, message=message)
        self.commit("assistant/message", data, surface=APPEND)
        execution = [("call", i) for i in ids] + [("outcome", i) for i in ids if rng.random() < 0.5]
        rng.shuffle(execution)
        started: set[str] = set()
        pending = list(ids)
        for kind, call_id in execution:
            if kind == "call":
                call = ToolCall(turn=turn, step=step, call_id=call_id, name="t", arguments="{}")
                self.commit("tool/call", call)
                started.add(call_id)
            elif call_id in started:
                result = Message.tool_result(call_id, "early")
                outcome = ToolOutcome(turn=turn, step=step, call_id=call_id, result=result)
                self.commit("tool/outcome", outcome)
            while pending and pending[0] in started and rng.random() < 0.7:
                self.result(turn, step, pending.pop(0))
        for call_id in pending:
            self.result(turn, step, call_id)

    def result(self, turn: int, step: int, call_id: str) -> None:
        message = Message.tool_result(call_id, f"output of {call_id} " * 3)
        data = ToolResult(turn=turn, step=step, message=message)
        self.commit("tool/result", data, surface=APPEND)

    def op_enqueue(self, a: int, b: int) -> None:
        target: Any = ("next-turn", "next-step")[a % 2]
        request_id = f"r{b % 6}"
        view = inbox(self.session)
        if view.request_seq(request_id) is not None:
            return  # a duplicate submission: found in O(1), admitted once
        message = Message.user(f"queued {b}", request_id=request_id)
        self.commit("agent/inbox/spliced", enqueue(view, target, message, wake=a % 3 > 0))

    def op_cancel(self, a: int, b: int) -> None:
        view = inbox(self.session)
        pending = [item.id for item in view]
        if pending:
            self.commit("agent/inbox/spliced", cancel(view, pending[a % len(pending)]))

    def op_compact(self, a: int, b: int) -> None:
        view = surface(self.session)
        cuts = [p for p in range(len(view) + 1) if view.open_calls_before(p) == 0]
        if len(cuts) < 2:
            return
        i, j = sorted(random.Random(a).sample(range(len(cuts)), 2))
        shadowed = view[cuts[i] : cuts[j]]
        op = Replace(shadowed[0], shadowed[-1])
        if b % 3 == 0:  # an empty assistant message: the span simply disappears
            empty = Message(id=f"e{b}", role="assistant", content=())
            data: Any = AssistantMessage(turn=max(self.turn, 1), step=1, message=empty)
            self.commit("assistant/message", data, surface=op, sources=shadowed)
        else:
            data = UserMessage(message=Message.user(f"summary {b}"))
            self.commit("user/message", data, surface=op, sources=shadowed)

    def op_prune(self, a: int, b: int) -> None:
        events = self.session.window(0)
        results = [s for s in surface(self.session) if events[s].type == "tool/result"]
        if not results:
            return
        seq = results[a % len(results)]
        old: ToolResult = events[seq].data
        part = old.message.tool_results[0]
        message = Message.tool_result(part.call_id, "[pruned]", is_error=part.is_error)
        data = ToolResult(turn=old.turn, step=old.step, message=message)
        self.commit("tool/result", data, surface=Replace(seq, seq), sources=(seq,))

    def op_bad(self, a: int, b: int) -> None:
        head = self.session.head
        if head < 0:
            return
        start, end = a % (head + 1), b % (head + 1)
        sources = tuple(range(min(start, end), max(start, end) + 1))
        data = UserMessage(message=Message.user("bad"))
        # Random spans are mostly refused; the rare valid one simply commits.
        self.refused("user/message", data, surface=Replace(start, end), sources=sources)
        self.refused("user/message", data, surface=Replace(start, start), sources=())
        prune = ToolResult(turn=1, step=1, message=Message.tool_result("zz", "x"))
        self.refused("tool/result", prune, surface=Replace(start, start), sources=(start,))
        self.refused("user/message", data)  # no surface operation: refused by validation

    def op_noise(self, a: int, b: int) -> None:
        self.commit("request/header", RequestHeader(system=f"system {a % 3}"))


@given(ops=operations, read_every=st.sampled_from([1, 1, 3]))
async def test_incremental_equals_rebuild_and_views_hold(
    ops: list[tuple[str, int, int]], read_every: int
) -> None:
    async with open_store("memory:") as store:
        history = History(await store.create(), read_every)
        for kind, a, b in ops:
            history.run(kind, a, b)
        history.check()
        history.check_held()
        session = history.session
        event(f"events: {10 * (session.head // 10)}+")
        event(f"replaces: {min(surface(session).generation, 3)}")


@given(ops=operations)
async def test_reopen_rebuilds_every_projection(
    ops: list[tuple[str, int, int]],
) -> None:
    # Whatever the log accepted, the fold on open accepts too and rebuilds the same state.
    async with open_store("memory:") as store:
        history = History(await store.create(session_id="p"), read_every=10**9)
        for kind, a, b in ops:
            history.run(kind, a, b)
        session = history.session
        await session.aclose()
        again = await store.open("p")
        assert list(surface(again)) == list(surface(session))
        assert messages(again) == messages(session)
        assert inbox(again) == inbox(session)
