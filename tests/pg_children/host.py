"""A "host" process for the PostgreSQL multi-process tests, driven line by line on stdin.

``python -m tests.pg_children.host URL SESSION_ID LEASE_TTL``; it prints ``ready`` once its
store is open, then answers each command with one line:

- ``open`` -> ``opened HEAD`` or ``busy``
- ``turn N`` -> a whole turn ``N`` appended and flushed -> ``flushed DURABLE`` or ``conflict``
- ``partial N`` -> turn ``N`` cut mid-step: an assistant message proposing two tool calls and
  the ``tool/call`` of the first, flushed -> ``flushed DURABLE``
- ``loop`` -> turns after the last stored one, forever, flushing at the agent's checkpoints
  (before the model request, after ``tool/call``, at step end) and printing ``flushed DURABLE``
  after each flush, until the process is killed
- ``close`` -> ``closed``; ``exit`` -> the store closes and the process ends.
"""

from __future__ import annotations

import sys

import anyio

from eventlog import (
    APPEND,
    AssistantMessage,
    ConflictError,
    Message,
    Replace,
    Session,
    SessionBusyError,
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


def _open_step(session: Session, turn: int) -> None:
    """``turn/start``, the user's message and ``step/start`` of turn ``turn``."""
    session.append("turn/start", TurnStart(turn=turn))
    session.append(
        "user/message", UserMessage(message=Message.user(f"turn {turn}")), surface=APPEND
    )
    session.append("step/start", StepStart(turn=turn, step=1))


def _turn(session: Session, turn: int) -> None:
    _open_step(session, turn)
    reply = Message.assistant(f"answer {turn}")
    session.append(
        "assistant/message",
        AssistantMessage(turn=turn, step=1, message=reply, finish="stop"),
        surface=APPEND,
    )
    session.append("step/end", StepEnd(turn=turn, step=1))
    session.append("turn/end", TurnEnd(turn=turn, reason="completed"))


def _partial(session: Session, turn: int) -> None:
    _open_step(session, turn)
    calls = tuple(
        ToolCallPart(id=f"call-{turn}-{i}", name="read_file", arguments='{"path": "a.py"}')
        for i in (1, 2)
    )
    proposal = Message.assistant("reading two files", tool_calls=calls)
    session.append(
        "assistant/message",
        AssistantMessage(turn=turn, step=1, message=proposal, finish="tool-calls"),
        surface=APPEND,
    )
    first = calls[0]
    session.append(
        "tool/call",
        ToolCall(turn=turn, step=1, call_id=first.id, name=first.name, arguments=first.arguments),
    )


async def _flush(session: Session) -> None:
    await session.flush()
    print(f"flushed {session.durable}", flush=True)


async def _loop(session: Session, compact_every: int = 0) -> None:
    """Turns forever (see the module docstring); with ``compact_every``, every that many turns
    the whole surface is replaced by a summary."""
    turn = 1 + max(
        (e.data.turn for e in (await session.events()) if e.type == "turn/start"), default=0
    )
    while True:
        _open_step(session, turn)
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
        if compact_every and turn % compact_every == 0:
            nodes = list(session.surface_index.nodes)
            summary = UserMessage(message=Message.user(f"summary up to turn {turn}"))
            replace = Replace(nodes[0], nodes[-1])
            session.append("user/message", summary, surface=replace, sources=nodes)
        turn += 1


async def main(url: str, session_id: str, lease_ttl: float) -> None:
    async with open_store(url, lease_ttl=lease_ttl) as store:
        print("ready", flush=True)
        session: Session | None = None
        while True:
            line = await anyio.to_thread.run_sync(sys.stdin.readline)
            command, _, arg = line.strip().partition(" ")
            if command in ("exit", ""):
                return
            if command == "open":
                try:
                    session = await store.open(session_id)
                except SessionBusyError:
                    print("busy", flush=True)
                    continue
                print(f"opened {session.head}", flush=True)
            elif command in ("turn", "partial"):
                assert session is not None
                try:
                    (_turn if command == "turn" else _partial)(session, int(arg))
                    await _flush(session)
                except ConflictError:
                    print("conflict", flush=True)
            elif command == "loop":
                assert session is not None
                await _loop(session)
            elif command == "close":
                assert session is not None
                await session.aclose()
                print("closed", flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], float(sys.argv[3]))
