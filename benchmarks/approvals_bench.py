"""Approval figures (``python -m benchmarks approvals``).

- a turn with one tool call on a SQLite file, plain against one that waits for a decision
  (the request flushed, ``run_until_idle`` returning, ``approve`` flushed, the run going on):
  what an approval round trip adds to a call;
- ``eventlog approvals --pending`` over 10,000 sessions of which 100 wait (1,000 and 10 with
  ``--quick``).
"""

from __future__ import annotations

import contextlib
import io
import tempfile
import time
from pathlib import Path

import anyio

from agent import Agent, ModelRequest, Response, ScriptedModel, tool
from eventlog import (
    APPEND,
    AssistantMessage,
    Message,
    StepStart,
    ToolApprovalRequest,
    ToolCallPart,
    TurnStart,
    open_store,
)

from ._harness import Figure, Stats, print_figure
from .workload import append_turn

__all__ = ("main",)


@tool(safe=True)
def plain(n: int) -> str:
    """A call that needs no decision."""
    return f"plain {n}"


@tool(approval=True, safe=True)
def guarded(n: int) -> str:
    """A call that needs one."""
    return f"guarded {n}"


def _reply(name: str) -> ScriptedModel:
    def reply(request: ModelRequest) -> Response:
        if request.messages[-1].role == "tool":
            return Response(text="done")
        return Response(tool_calls=[(name, '{"n": 1}')])

    return ScriptedModel(reply)


def _turn_ms(turns: int, *, approval: bool) -> float:
    """Median milliseconds of one turn (prompt to turn end) with one call, on SQLite."""

    async def measure() -> float:
        with tempfile.TemporaryDirectory() as tmp:
            async with open_store(f"sqlite:///{tmp}/bench.db") as store:
                session = await store.create()
                name = "guarded" if approval else "plain"
                agent = Agent(session, _reply(name), [plain, guarded])
                times = []
                for n in range(turns):
                    start = time.perf_counter()
                    agent.followup(f"turn {n}")
                    outcomes = await agent.run_until_idle()
                    if approval:
                        assert outcomes[-1].reason == "awaiting approval"
                        (waiting,) = await agent.pending_approvals()
                        await agent.approve(waiting.call_id, by="bench")
                        outcomes = await agent.run_until_idle()
                    assert outcomes[-1].reason == "completed"
                    times.append(time.perf_counter() - start)
                await session.aclose()
        times.sort()
        return times[len(times) // 2] * 1000

    return anyio.run(measure)


async def _fill(url: str, sessions: int, waiting: int) -> None:
    """``sessions`` sessions of one finished turn each; every ``sessions // waiting``-th also
    has a second turn waiting for a decision."""
    every = sessions // waiting
    async with open_store(url) as store:
        for n in range(sessions):
            session = await store.create(session_id=f"s{n:06d}")
            append_turn(session, 1)
            if n % every == 0:
                session.append("turn/start", TurnStart(turn=2))
                session.append("step/start", StepStart(turn=2, step=1))
                call = ToolCallPart(id="c1", name="guarded", arguments='{"n": 1}')
                reply = AssistantMessage(
                    turn=2,
                    step=1,
                    message=Message.assistant(tool_calls=(call,)),
                    finish="tool-calls",
                )
                proposed = session.append("assistant/message", reply, surface=APPEND)
                asked = ToolApprovalRequest(
                    turn=2, step=1, call_id="c1", name="guarded", arguments='{"n": 1}'
                )
                session.append("tool/approval-request", asked, sources=(proposed.seq,))
            await session.aclose()


def _pending_seconds(url: str) -> float:
    from agent.cli import main as cli

    out = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out):
        code = cli(["--db", url, "approvals", "--pending", "--json"])
    elapsed = time.perf_counter() - start
    assert code == 0, out.getvalue()
    return elapsed


def main(*, quick: bool = False) -> None:
    runs = 3 if quick else 5
    turns = 10 if quick else 40
    for approval in (False, True):
        label = "waits for approve()" if approval else "plain"
        values = tuple(_turn_ms(turns, approval=approval) for _ in range(runs))
        print_figure(Figure(f"turn with one tool call, SQLite, {label}", Stats(values), "ms"))
    sessions, waiting = (1_000, 10) if quick else (10_000, 100)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'many.db'}"
        anyio.run(_fill, url, sessions, waiting)
        values = tuple(_pending_seconds(url) for _ in range(3))
        name = f"approvals --pending, {sessions:,} sessions, {waiting} waiting"
        print_figure(Figure(name, Stats(values), "s"))
