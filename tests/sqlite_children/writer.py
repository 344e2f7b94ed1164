"""A child process that writes to a SQLite store, for the multi-process tests.

``python writer.py PATH SESSION MODE [ARG]`` prints one line per fact the parent needs:

- ``forever [DURABILITY]``: create or open SESSION, then append a turn and flush, forever; after
  each flush print ``flushed HEAD``. The parent kills it with SIGKILL.
- ``race GO_FILE``: wait until GO_FILE exists, try to open SESSION for writing; print ``won`` or
  ``busy``; the winner appends a turn, flushes, prints ``flushed HEAD``, and keeps the session
  open until its stdin closes.
- ``load SECONDS``: create SESSION and append-and-flush turns for SECONDS; print
  ``done HEAD`` after the store is closed, or ``error TYPE: MESSAGE``.
- ``turns COUNT``: open SESSION, append and flush COUNT turns one by one, print ``done HEAD``.
- ``stale``: open SESSION, print ``opened``, wait for a line on stdin, then append a turn and
  flush; print ``flushed HEAD`` or ``conflict MESSAGE``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import anyio

from eventlog import (
    APPEND,
    ConflictError,
    EventLogError,
    Message,
    Session,
    SessionBusyError,
    SessionNotFoundError,
    StepEnd,
    StepStart,
    TurnEnd,
    TurnStart,
    UserMessage,
    open_store,
)
from eventlog.stores import LogStore


def say(line: str) -> None:
    print(line, flush=True)


def append_turn(session: Session) -> None:
    # The next turn number (head + 2 numbered turns 1, 6, 11, ...: an ill-formed log).
    turn = session.grammar.last_turn + 1
    session.append("turn/start", TurnStart(turn=turn))
    text = f"turn {turn} from process " + "x" * 200
    session.append("user/message", UserMessage(message=Message.user(text)), surface=APPEND)
    session.append("step/start", StepStart(turn=turn, step=1))
    session.append("step/end", StepEnd(turn=turn, step=1))
    session.append("turn/end", TurnEnd(turn=turn, reason="completed"))


async def create_or_open(store: LogStore, session_id: str) -> Session:
    try:
        return await store.open(session_id)
    except SessionNotFoundError:
        return await store.create(session_id=session_id)


async def forever(store: LogStore, session_id: str) -> None:
    session = await create_or_open(store, session_id)
    while True:
        append_turn(session)
        await session.flush()
        say(f"flushed {session.durable}")


async def race(store: LogStore, session_id: str, go_file: str) -> None:
    while not Path(go_file).exists():
        await anyio.sleep(0.001)  # a cross-process barrier: poll a file
    try:
        session = await store.open(session_id)
    except SessionBusyError:
        say("busy")
        return
    say("won")
    append_turn(session)
    await session.flush()
    say(f"flushed {session.durable}")
    await anyio.to_thread.run_sync(sys.stdin.read)  # hold the lease until the parent says


async def load(store: LogStore, session_id: str, seconds: float) -> int:
    session = await store.create(session_id=session_id)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        append_turn(session)
        await session.flush()
    return session.head


async def turns(store: LogStore, session_id: str, count: int) -> int:
    session = await store.open(session_id)
    for _ in range(count):
        append_turn(session)
        await session.flush()
    return session.head


async def stale(store: LogStore, session_id: str) -> None:
    session = await store.open(session_id)
    say("opened")
    await anyio.to_thread.run_sync(sys.stdin.readline)
    if session.grammar.turn is not None:
        # Its view has a turn open: the next well-formed event closes it.
        session.append("turn/end", TurnEnd(turn=session.grammar.turn, reason="completed"))
    else:
        append_turn(session)
    try:
        await session.flush()
    except ConflictError as exc:
        say(f"conflict {exc.message}")
        return
    say(f"flushed {session.durable}")


async def main(*argv: str) -> None:
    path, session_id, mode, arg = (*argv, "")[:4]
    url = f"sqlite:///{path}"
    options = {"durability": arg} if mode == "forever" and arg else {}
    try:
        async with open_store(url, **options) as store:
            if mode == "forever":
                await forever(store, session_id)
            elif mode == "race":
                await race(store, session_id, arg)
            elif mode == "load":
                head = await load(store, session_id, float(arg))
            elif mode == "stale":
                await stale(store, session_id)
            elif mode == "turns":
                head = await turns(store, session_id, int(arg))
            else:
                raise SystemExit(f"unknown mode {mode!r}")
    except EventLogError as exc:
        say(f"error {type(exc).__name__}: {exc}")
        raise SystemExit(1) from exc
    if mode in ("load", "turns"):
        say(f"done {head}")


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:])
