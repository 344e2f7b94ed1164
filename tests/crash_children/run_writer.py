"""Crash-test children: play generated agent runs into a SQLite file until killed.

A *zygote* process (``python -m tests.crash_children.run_writer``) imports everything once,
then forks one child per command line it reads on stdin::

    go DB_PATH PROGRESS_PATH BATCH DURABILITY

and answers ``pid PID`` when the child runs; on the next line, ``reap``, it waits for the child
and answers ``exit PID STATUS``. (Reaping only when told keeps the pid from being reused while
the parent may still signal it.) The parent SIGKILLs the child at a random moment; forking
from an idle, single-threaded, already imported process makes each kill cost milliseconds
instead of an interpreter start.

The child creates session after session, each playing :func:`recovery.testing.random_run` of
its own seed and flushing at the agent's semantic checkpoints. It reports to the progress file,
one ``os.write`` per line on an ``O_APPEND`` descriptor (so a kill never tears a line, and the
kernel keeps what was written when the process dies)::

    run SESSION_ID SEED      after the session was created
    flushed SESSION_ID SEQ   after a flush returned: events 0..SEQ are durable
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import anyio

from eventlog import open_store
from recovery.testing import random_run

#: Runs per child before it ends by itself (a kill normally comes much earlier).
RUNS_PER_CHILD = 40


def run_seed(batch: int, index: int) -> int:
    """The seed of run ``index`` of child batch ``batch`` (the parent rebuilds runs from it)."""
    return batch * 1000 + index


async def play_runs(db: str, progress: int, batch: int, durability: str) -> None:
    async with open_store(f"sqlite:///{db}", durability=durability) as store:
        for index in range(RUNS_PER_CHILD):
            seed = run_seed(batch, index)
            session_id = f"b{batch}-r{index}"
            session = await store.create(session_id=session_id)
            os.write(progress, f"run {session_id} {seed}\n".encode())

            def report(durable: int, session_id: str = session_id) -> None:
                os.write(progress, f"flushed {session_id} {durable}\n".encode())

            await random_run(seed).play(session, on_flush=report)
            await session.aclose()


def child(db: str, progress_path: str, batch: int, durability: str) -> NoReturn:
    status = 1
    try:
        progress = os.open(progress_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        anyio.run(play_runs, db, progress, batch, durability)
        status = 0
    finally:
        os._exit(status)


def preload() -> None:
    """Import what the children would otherwise import lazily on their first ``anyio.run``
    (the asyncio backend, the SQLite store): imported once here, shared by every fork."""
    import asyncio  # noqa: F401
    import importlib

    importlib.import_module("anyio._backends._asyncio")
    importlib.import_module("eventlog.stores.sqlite")


def zygote() -> None:
    preload()
    for line in sys.stdin:
        command, db, progress_path, batch, durability = line.split()
        assert command == "go", line
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child never returns
            child(db, progress_path, int(batch), durability)
        print(f"pid {pid}", flush=True)
        assert sys.stdin.readline().strip() == "reap"
        _, status = os.waitpid(pid, 0)
        print(f"exit {pid} {status}", flush=True)


if __name__ == "__main__":
    zygote()
