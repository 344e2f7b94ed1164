"""OpenAI Agents SDK ``SQLiteSession`` backed by a file.

Equivalent of the workload: the SDK stores Responses-API items, not lifecycle events. A turn is
the 10 items a Runner would persist: the user message, then per step the assistant ``message``
item, its ``function_call`` item and the ``function_call_output`` item — the same text and
tool-call content as the 18 events (the 8 turn/step boundary events have no equivalent and are
not stored). ``add_items`` is called once per turn with the turn's items, as the Runner does at
the end of a turn. Throughput is still counted as 18 workload events per turn so that every row
measures the same unit of work.

Durability: the SDK enables WAL and leaves ``synchronous`` at SQLite's default, FULL on this
build (read back from the SDK's own connection after the run and reported); each ``add_items``
commits, so every turn is fsynced before it returns.

Concurrent sessions: one ``SQLiteSession`` and one asyncio task per session on the same file;
the SDK serializes writes to a file with a process-wide lock, each ``add_items`` its own commit.

Load path: ``get_items()`` selects the session's rows and ``json.loads`` each one; a row that
does not decode is silently skipped. It validates nothing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

from agents import SQLiteSession, TResponseInputItem

from benchmarks.workload import turn_events

from ._common import Stopwatch, Timing, WriteResult, durability_settings

__all__ = ("OpenAIAgents", "turn_items")

_SESSION = "oai-session"


def turn_items(turn: int) -> list[TResponseInputItem]:
    """The Responses-API items of one workload turn, as the SDK would store them."""
    items: list[dict[str, Any]] = []
    for type_, data, _surface in turn_events(turn):
        if type_ == "user/message":
            text = data.message.text
            items.append({"role": "user", "content": text, "type": "message"})
        elif type_ == "assistant/message":
            message = data.message
            items.append(
                {
                    "id": f"msg_{message.id}",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": message.text, "annotations": []}],
                }
            )
            items.extend(
                {
                    "id": f"fc_{call.id}",
                    "type": "function_call",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": call.arguments,
                    "status": "completed",
                }
                for call in message.tool_calls
            )
        elif type_ == "tool/result":
            items.extend(
                {"type": "function_call_output", "call_id": part.call_id, "output": part.text}
                for part in data.message.tool_results
            )
    return cast("list[TResponseInputItem]", items)


class OpenAIAgents:
    """openai-agents ``SQLiteSession`` on a file, ``add_items`` once per turn."""

    name = "openai-agents SQLiteSession"
    package = "openai-agents"
    durability = "WAL (library), synchronous=FULL (SQLite default), one add_items per turn"
    validates = "nothing (json.loads; undecodable rows skipped)"
    validating = False

    def write(self, path: Path, turns: int) -> WriteResult:
        return asyncio.run(self._write(path, turns))

    async def _write(self, path: Path, turns: int) -> WriteResult:
        session = SQLiteSession(_SESSION, path)
        try:
            with Stopwatch() as watch:
                for turn in range(1, turns + 1):
                    await session.add_items(turn_items(turn))
            settings = await asyncio.to_thread(_settings, session)
        finally:
            session.close()
        return WriteResult(watch.timing, _SESSION, settings)

    def reload(self, path: Path, session_id: str) -> Timing:
        return asyncio.run(self._reload(path, session_id))

    def write_concurrent(self, path: Path, sessions: int, turns: int) -> Timing:
        return asyncio.run(self._write_concurrent(path, sessions, turns))

    async def _write_concurrent(self, path: Path, sessions: int, turns: int) -> Timing:
        opened = [SQLiteSession(f"{_SESSION}-{index}", path) for index in range(sessions)]

        async def work(session: SQLiteSession) -> None:
            for turn in range(1, turns + 1):
                await session.add_items(turn_items(turn))

        try:
            with Stopwatch() as watch:
                await asyncio.gather(*(work(session) for session in opened))
        finally:
            for session in opened:
                session.close()
        return watch.timing

    async def _reload(self, path: Path, session_id: str) -> Timing:
        session = SQLiteSession(session_id, path)
        try:
            with Stopwatch() as watch:
                items = await session.get_items()
        finally:
            session.close()
        assert items, "the session must not be empty"
        return watch.timing

    def max_turns(self) -> int | None:
        return None


def _settings(session: SQLiteSession) -> dict[str, str]:
    # The SDK keeps one connection per worker thread and exposes none; this reads the settings
    # of one made by its private factory, which is what every add_items ran with.
    connect = getattr(session, "_get_connection", None)
    if connect is None:
        return {}
    connection = connect()
    return durability_settings(connection)
