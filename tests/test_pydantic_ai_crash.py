"""A pydantic-ai agent SIGKILLed inside a tool body, then run again in a new process.

pydantic-ai keeps a run's messages in memory: a history saved by hand after the run keeps
nothing of a run the process died in, and the model asks for the calls again. With
``EventlogHistory`` and its durable toolset the reply and each call were logged and flushed
before the body ran: the rerun continues the cut run, answers the call that may have run with
``TOOL_OUTCOME_UNKNOWN``, gives the finished one its recorded result and runs only the one that
never started.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import anyio

from agent.cli import main as cli
from agent.integrations.pydantic_ai import EventlogHistory, pydantic_ai_types
from eventlog import open_store
from recovery import outcome_unknown_text, scan

ROOT = Path(__file__).resolve().parent.parent


def run_child(db: str, marker: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tests.pydantic_ai_children.run", db, str(marker)]
    return subprocess.run([*command, *extra], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_a_call_killed_in_its_body_is_answered_not_repeated(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'sessions.db'}"
    marker = tmp_path / "effects.txt"

    # The first process: lookup finishes, the process dies inside transfer, notify never starts.
    first = run_child(db, marker, "kill")
    assert first.returncode == -signal.SIGKILL, first.stderr
    assert marker.read_text() == "lookup\ntransfer\n"

    # A new process finds the run cut and continues it (no new prompt).
    second = run_child(db, marker)
    assert second.returncode == 0, second.stderr
    pending, output = second.stdout.splitlines()
    assert pending == "pending=True"
    # What the model was told about each call, in its own order.
    assert json.loads(output) == [
        {"id": "call_1", "outcome": "success", "content": "bob: account 42"},
        {
            "id": "call_2",
            "outcome": "failed",
            "content": outcome_unknown_text("transfer", "call_2"),
        },
        {"id": "call_3", "outcome": "success", "content": "notified bob"},
    ]
    # Each body ran once: the finished lookup was not redone, the transfer not repeated.
    assert marker.read_text() == "lookup\ntransfer\nnotify\n"

    # The session: the cut turn completed by the rerun, the call classed as outcome unknown.
    codes, texts = anyio.run(tool_results, db)
    assert codes == [None, "TOOL_OUTCOME_UNKNOWN", None]
    assert texts[1] == outcome_unknown_text("transfer", "call_2")
    # A third run is a new turn on the same history.
    third = run_child(db, marker)
    assert third.returncode == 0 and third.stdout.startswith("pending=False"), third.stderr
    assert cli(["--db", db, "verify", "conversation-1"]) == 0


async def tool_results(db: str) -> tuple[list[str | None], list[str]]:
    """The error codes and texts of the session's tool results; it needs no repair."""
    async with open_store(db, types=pydantic_ai_types()) as store:
        history = await EventlogHistory.open(store, "conversation-1")
        assert not history.pending and not scan(history.log).needs_repair
        results = [e.data for e in history.log.window() if e.type == "tool/result"]
        await history.log.aclose()
    codes = [r.error.code if r.error else None for r in results]
    return codes, [r.message.tool_results[0].text for r in results]
