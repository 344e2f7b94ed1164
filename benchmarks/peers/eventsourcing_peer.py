"""``eventsourcing`` (pyeventsourcing) with its SQLite persistence module.

Equivalent of the workload: one aggregate per session (``AgentSession``) whose history is the
list of recorded events; each of the 18 events of a turn is one domain event, triggered by the
``@event``-decorated command method ``record(type, data)`` with the payload as plain JSON-like
builtins (eventsourcing's JSON transcoder stores them). ``app.save(aggregate)`` once per turn
writes the turn's 18 pending events in one transaction, the way an application saves after each
command. Snapshotting is left at its default (off), as in the library's examples.

Durability: ``PERSISTENCE_MODULE=eventsourcing.sqlite`` with a file database. The library turns
on WAL and leaves ``synchronous`` at SQLite's default, which on this build is FULL (read back from
the library's own pooled connection after the run and reported), so each ``save`` fsyncs the
write-ahead log before returning.

Concurrent sessions: one thread and one aggregate per session sharing one application (its
connection pool); SQLite's write lock serializes the saves, each its own commit.

Load path: ``app.repository.get(id)`` selects the aggregate's stored events, decodes them and
replays them through the aggregate. It validates order (each event's ``originator_version`` must
follow the aggregate's version, else ``OriginatorVersionError``); payloads are not checked
against a schema and there is no integrity hash.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any, cast

from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event
from eventsourcing.sqlite import SQLiteFactory

from ._common import (
    Stopwatch,
    Timing,
    WriteResult,
    durability_settings,
    native_turn,
    write_in_threads,
)

__all__ = ("EventSourcing",)


class AgentSession(Aggregate):  # type: ignore[misc, unused-ignore]  # Any without bench
    """One agent session: its history is every recorded workload event, in order."""

    def __init__(self) -> None:
        self.history: list[tuple[str, dict[str, Any]]] = []

    @event("Recorded")  # type: ignore[untyped-decorator, unused-ignore]
    def record(self, type: str, data: dict[str, Any]) -> None:
        self.history.append((type, data))


def _application(path: Path) -> Application[uuid.UUID]:
    return Application(
        env={"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(path)}
    )


def _settings(app: Application[uuid.UUID]) -> dict[str, str]:
    pool = cast(SQLiteFactory, app.factory).datastore.pool
    connection = pool.get_connection(is_writer=False)
    try:
        # The pool's connections are the library's own; the sqlite3 one inside is private.
        sqlite_connection = getattr(connection, "_sqlite_conn", None)
        if sqlite_connection is None:
            return {}
        return durability_settings(sqlite_connection)
    finally:
        pool.put_connection(connection)


class EventSourcing:
    """eventsourcing's SQLite application, one aggregate per session, one save per turn."""

    name = "eventsourcing"
    package = "eventsourcing"
    durability = "WAL (library), synchronous=FULL (SQLite default), one save() per turn"
    validates = "event order (originator_version)"
    validating = True

    def write(self, path: Path, turns: int) -> WriteResult:
        app = _application(path)
        try:
            with Stopwatch() as watch:
                session = AgentSession()
                for turn in range(1, turns + 1):
                    for type_, data in native_turn(turn):
                        session.record(type=type_, data=data)
                    app.save(session)
            settings = _settings(app)
            session_id = str(session.id)
        finally:
            app.close()
        return WriteResult(watch.timing, session_id, settings)

    def reload(self, path: Path, session_id: str) -> Timing:
        app = _application(path)
        try:
            with Stopwatch() as watch:
                session: AgentSession = app.repository.get(uuid.UUID(session_id))
        finally:
            app.close()
        assert session.history, "the session must not be empty"
        return watch.timing

    def write_concurrent(self, path: Path, sessions: int, turns: int) -> Timing:
        """One thread and one aggregate per session, sharing one application."""
        app = _application(path)

        def work(_index: int, start: threading.Barrier) -> None:
            session = AgentSession()
            start.wait()
            for turn in range(1, turns + 1):
                for type_, data in native_turn(turn):
                    session.record(type=type_, data=data)
                app.save(session)

        try:
            return write_in_threads(sessions, work)
        finally:
            app.close()

    def max_turns(self) -> int | None:
        return None
