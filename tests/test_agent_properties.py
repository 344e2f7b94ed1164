"""Properties of whole agent runs: any script, any cancel point, any cap.

Whatever the model streams and wherever a cancel lands (at any chunk, or as any tool starts),
the session ends balanced and valid, nothing starts after the cancel, every call answered
``ABORTED_BEFORE_DISPATCH`` never ran, and every call that ran has its real result.
"""

from __future__ import annotations

import anyio
import msgspec
from hypothesis import given, note
from hypothesis import strategies as st

from agent import (
    Agent,
    Chunk,
    ModelRequest,
    Response,
    RetryPolicy,
    ScriptedModel,
    ToolContext,
    ToolOutput,
)
from eventlog import ToolCallPart, open_store
from recovery.testing import check_invariants
from tests.agent_children.support import Probe, Tracker

NO_WAIT = RetryPolicy(initial_delay=0)  # failed and empty attempts are retried at once


class _Step(msgspec.Struct, frozen=True):
    text: str
    calls: tuple[tuple[bool, int], ...]  # (safe, spins) per call
    finish: str  # "normal", "max-tokens" or "error"


steps = st.builds(
    _Step,
    text=st.sampled_from(["", "  ", "thinking about it"]),
    calls=st.lists(st.tuples(st.booleans(), st.integers(0, 4)), max_size=4).map(tuple),
    finish=st.sampled_from(["normal", "normal", "normal", "max-tokens", "error"]),
)


class _CancellingProbe(Probe):
    """Cancels the agent when the call with index ``at`` (counting every start) starts."""

    def __init__(self, name: str, tracker: Tracker, *, safe: bool, trigger: list[int]) -> None:
        super().__init__(name, tracker, safe=safe)
        self.trigger = trigger
        self.agent: Agent | None = None

    async def call(self, args: object, context: ToolContext) -> ToolOutput:
        self.trigger[0] -= 1
        if self.trigger[0] == 0 and self.agent is not None:
            self.agent.cancel()
        return await super().call(args, context)


@given(
    script=st.lists(steps, min_size=1, max_size=4),
    cancel_at_chunk=st.one_of(st.none(), st.integers(1, 30)),
    cancel_at_start=st.one_of(st.none(), st.integers(1, 6)),
    cap=st.integers(1, 3),
)
def test_any_run_with_any_cancel_point_ends_valid(
    script: list[_Step], cancel_at_chunk: int | None, cancel_at_start: int | None, cap: int
) -> None:
    note(f"cap={cap} cancel_at_chunk={cancel_at_chunk} cancel_at_start={cancel_at_start}")

    def reply(request: ModelRequest) -> Response:
        n = sum(1 for m in request.messages if m.role == "assistant")
        if n >= len(script):
            return Response(text="done")
        step = script[n]
        calls = [
            ToolCallPart(
                id=f"s{n}-c{i}", name="safe" if safe else "solo", arguments=f'{{"spins": {k}}}'
            )
            for i, (safe, k) in enumerate(step.calls)
        ]
        finish = {"normal": None, "max-tokens": "max-tokens", "error": "error"}[step.finish]
        return Response(text=step.text, tool_calls=calls, finish=finish, chunk_size=4)  # type: ignore[arg-type]

    async def run() -> None:
        tracker = Tracker()
        trigger = [cancel_at_start or 0]
        tools = [
            _CancellingProbe("safe", tracker, safe=True, trigger=trigger),
            _CancellingProbe("solo", tracker, safe=False, trigger=trigger),
        ]
        async with open_store("memory:") as store:
            session = await store.create()
            agent = Agent(session, ScriptedModel(reply), tools, max_parallel=cap, retry=NO_WAIT)
            for probe in tools:
                probe.agent = agent
            chunks = [0]
            cancelled_after: list[int] = []  # how many calls had started at the cancel

            def on_chunk(chunk: Chunk) -> None:
                chunks[0] += 1
                if chunks[0] == cancel_at_chunk:
                    cancelled_after.append(len(tracker.starts()))
                    agent.cancel()

            agent.on_chunk(on_chunk)
            agent.followup("go")
            with anyio.fail_after(20):
                outcomes = await agent.run_until_idle()
            check_invariants(session)
            # Every call that ran got its real result; every aborted call never ran.
            ran = set(tracker.starts())
            for event in await session.events():
                if event.type != "tool/result":
                    continue
                call_id = event.data.message.tool_results[0].call_id
                error = event.data.error
                if error is not None and error.code == "ABORTED_BEFORE_DISPATCH":
                    assert call_id not in ran
                elif call_id in ran:
                    assert event.data.message.tool_results[0].content.endswith(" ok")
            # Nothing started after a cancel made at a chunk.
            if cancelled_after:
                assert len(tracker.starts()) == cancelled_after[0]
                assert outcomes[-1].reason == "aborted"
            assert tracker.overlaps == []
            assert tracker.max_in_flight <= cap

    anyio.run(run)
