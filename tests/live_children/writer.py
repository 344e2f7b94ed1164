"""A live writer: ``python -m tests.live_children.writer URL SESSION_ID``.

Creates SESSION_ID and writes turns into it forever, flushing at the agent's checkpoints
(before the model request, after ``tool/call``, at step end), compacting the whole surface every
third turn, with a snapshot every few events, so a reader meets every state a healthy live
session passes through: an open turn, an open step, a dangling call, a fresh compaction, a
snapshot written a moment ago. After each flush it prints ``flushed DURABLE``. The parent ends it
with SIGKILL.
"""

from __future__ import annotations

import sys

import anyio

from eventlog import (
    APPEND,
    AssistantMessage,
    Message,
    Replace,
    Session,
    StepEnd,
    StepStart,
    ToolCall,
    ToolCallPart,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
    open_store,
)


async def _flush(session: Session) -> None:
    await session.flush()
    print(f"flushed {session.durable}", flush=True)


async def _turn(session: Session, turn: int) -> None:
    session.append("turn/start", TurnStart(turn=turn))
    ask = UserMessage(message=Message.user(f"turn {turn}: read a.py"))
    session.append("user/message", ask, surface=APPEND)
    session.append("step/start", StepStart(turn=turn, step=1))
    await _flush(session)  # before the model request
    call = ToolCallPart(id=f"call-{turn}", name="read_file", arguments='{"path": "a.py"}')
    proposal = Message.assistant("reading", tool_calls=(call,))
    session.append(
        "assistant/message",
        AssistantMessage(turn=turn, step=1, message=proposal, finish="tool-calls"),
        surface=APPEND,
    )
    session.append(
        "tool/call",
        ToolCall(turn=turn, step=1, call_id=call.id, name=call.name, arguments=call.arguments),
    )
    await _flush(session)  # before the tool body runs
    result = Message.tool_result(call.id, "print('a')")
    session.append("tool/result", ToolResult(turn=turn, step=1, message=result), surface=APPEND)
    session.append("step/end", StepEnd(turn=turn, step=1))
    await _flush(session)  # at step end
    session.append("turn/end", TurnEnd(turn=turn, reason="completed"))
    if turn % 3 == 0:
        nodes = list(session.surface_index.nodes)
        summary = UserMessage(message=Message.user(f"summary up to turn {turn}"))
        session.append("user/message", summary, surface=Replace(nodes[0], nodes[-1]), sources=nodes)


async def main(url: str, session_id: str) -> None:
    options = {"lease_ttl": 5.0} if url.startswith("postgres") else {}
    async with open_store(url, snapshot_every=7, **options) as store:
        session = await store.create(session_id=session_id)
        turn = 1
        while True:
            await _turn(session, turn)
            turn += 1


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
