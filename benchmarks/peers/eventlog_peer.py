"""eventlog on ``sqlite:///``: flush once per turn, and the background writer.

Equivalent of the workload: the 18 events themselves, committed with ``session.append`` (each
payload validated against its registered type, the surface index advanced) through
``benchmarks.workload.append_turn``.

Two ways of making a session durable, measured as two rows:

- **flush per turn** (``durability="power-loss"``): ``await session.flush()`` after each turn,
  so the turn is fsynced (WAL, ``synchronous=FULL``) before the next one starts — the same
  guarantee as every peer.
- **background writer**: no flush between turns. The loop yields to the event loop once per
  turn, as an agent awaiting its model would, and the store's writer drains on its own every
  ``write_delay`` (10 ms), group-committing whatever turns have accumulated; one ``flush`` at
  the end makes the last ones durable before the clock stops. Every event is durable within
  about ``write_delay`` of its commit rather than at the end of its turn: a weaker guarantee
  than the other rows, shown separately for that reason.

Concurrent sessions: one task per session, all in one store, so each writer round commits
every session's pending turns in one transaction and one fsync (group commit).

Load path: ``store.open(session_id)`` on a freshly opened store reads the session's rows,
verifies the blake2b hash chain, decodes every payload against its registered type and rebuilds
the surface index (docs/stores.md). It validates schema, order and integrity.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import anyio
import anyio.lowlevel

from benchmarks.workload import append_turn
from eventlog import Session, open_store
from eventlog.stores import LogStore

from ._common import Stopwatch, Timing, WriteResult, durability_settings

__all__ = ("EventlogBackground", "EventlogFlushPerTurn")

_DURABILITY = "power-loss"


def _store(path: Path) -> LogStore:
    return open_store(f"sqlite:///{path}", durability=_DURABILITY)


async def _settings(store: LogStore) -> dict[str, str]:
    """The settings of the store's writer connection, read back on its own thread.

    Reaches into the SQLite backend's private writer worker, the only way to see the pragmas
    the store really runs with; if that changes, the configured durability is reported alone.
    """
    settings = {"durability": _DURABILITY}
    worker = getattr(store.backend, "_writer", None)
    if worker is not None:
        settings.update(await worker.call(durability_settings))
    return settings


async def _reload(path: Path, session_id: str) -> Timing:
    async with _store(path) as store:
        with Stopwatch() as watch:
            session = await store.open(session_id)
        head = session.head
        await session.aclose()
    assert head >= 0, "the session must not be empty"
    return watch.timing


async def _write_turns(session: Session, turns: int, *, flush: bool) -> None:
    """Commit ``turns`` standard turns; flush after each, or yield and let the writer drain."""
    for turn in range(1, turns + 1):
        append_turn(session, turn)
        if flush:
            await session.flush()
        else:
            await anyio.lowlevel.checkpoint()
    await session.flush()


async def _write(path: Path, turns: int, *, flush: bool) -> WriteResult:
    async with _store(path) as store:
        session = await store.create()
        with Stopwatch() as watch:
            await _write_turns(session, turns, flush=flush)
        await session.aclose()
        settings = await _settings(store)
    return WriteResult(watch.timing, session.id, settings)


async def _write_concurrent(path: Path, sessions: int, turns: int, *, flush: bool) -> Timing:
    """``sessions`` tasks, one per session, sharing one store and so its group commit."""
    async with _store(path) as store:
        opened = [await store.create() for _ in range(sessions)]
        with Stopwatch() as watch:
            async with anyio.create_task_group() as group:
                for session in opened:
                    group.start_soon(partial(_write_turns, session, turns, flush=flush))
        for session in opened:
            await session.aclose()
    return watch.timing


class _Eventlog:
    """eventlog on a fresh ``sqlite:///`` store at ``power-loss`` durability."""

    package = "eventlog"
    validates = "schema, order, hash chain"
    validating = True
    #: Flush after every turn; False leaves it to the background writer (one flush at the end).
    flush: bool

    def write(self, path: Path, turns: int) -> WriteResult:
        return anyio.run(partial(_write, path, turns, flush=self.flush))

    def reload(self, path: Path, session_id: str) -> Timing:
        return anyio.run(_reload, path, session_id)

    def write_concurrent(self, path: Path, sessions: int, turns: int) -> Timing:
        return anyio.run(partial(_write_concurrent, path, sessions, turns, flush=self.flush))

    def max_turns(self) -> int | None:
        return None


class EventlogFlushPerTurn(_Eventlog):
    """eventlog, ``power-loss`` durability, ``await session.flush()`` after every turn."""

    name = "eventlog (flush per turn)"
    durability = "power-loss (WAL, synchronous=FULL), one flush per turn"
    flush = True


class EventlogBackground(_Eventlog):
    """eventlog, ``power-loss`` durability, the background writer drains; one final flush."""

    name = "eventlog (background writer)"
    durability = "power-loss (WAL, synchronous=FULL), writer drains every 10 ms, flush at end"
    flush = False
