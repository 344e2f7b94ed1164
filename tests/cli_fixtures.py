"""Real SQLite files holding generated agent runs, for the ``eventlog`` command's tests.

:func:`build_runs_db` writes one file with a session in every state the command must handle:
a finished run with a compaction and an app extension event (``balanced``), a run cut by a crash
inside a step with dangling calls of all three classes (``crashed``), the same cut repaired
(``repaired``), a run stopped right after a ``turn/start`` (``open``), and a finished run with
one stored byte changed behind the store's back (``corrupt``).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import msgspec
import pytest

from agent import Agent, ModelRequest, Response, RetryPolicy, ScriptedModel, Tool, ToolOutput, tool
from eventlog import EventTypes, Session, Usage, open_store
from recovery import repair
from recovery.testing import AgentRun, random_run

__all__ = (
    "CORRUPT_SEQ",
    "CRASH_STOP",
    "FAILED_CALLS",
    "HeldOpen",
    "SEED",
    "Note",
    "build_runs_db",
    "cli",
    "cli_types",
    "drop_users_reply",
    "copy_db",
    "play_failures",
    "play_into",
    "run_failures",
    "run_main",
    "shared_runs_db",
    "the_run",
    "url_of",
    "waiting_for_approval",
)

#: The seed of the generated run every session is cut from: two turns, tool calls answered
#: out of order, a compaction replace.
SEED = 5
#: Events of the run kept in ``crashed``: the crash hits inside a step whose calls are
#: recovered (outcome logged), outcome-unknown (call logged) and not-started (only proposed).
CRASH_STOP = 11
#: The event of ``corrupt`` whose stored data is altered.
CORRUPT_SEQ = 2


class Note(msgspec.Struct, frozen=True, kw_only=True):
    """An app's own ignorable event type, unknown to the command."""

    text: str


def cli_types() -> EventTypes:
    """The core vocabulary plus the app type ``app/note`` (ignorable)."""
    types = EventTypes()
    types.register("app/note", Note, ignorable=True)
    return types


def url_of(path: Path) -> str:
    return f"sqlite:///{path}"


def the_run() -> AgentRun:
    return random_run(SEED)


async def play_into(url: str, session_id: str, run: AgentRun, stop: int | None = None) -> None:
    """Create ``session_id`` in the store at ``url`` holding ``run`` up to ``stop``."""
    async with open_store(url, types=cli_types()) as store:
        session = await store.create(session_id, metadata={"run": session_id})
        await run.play(session, stop)
        await session.aclose()


async def _build(url: str) -> None:
    run = the_run()
    first_turn = next(i for i, e in enumerate(run.events) if e.type == "turn/start")
    async with open_store(url, types=cli_types()) as store:
        balanced = await store.create("balanced", metadata={"run": "balanced"})
        await run.play(balanced)
        balanced.append("app/note", Note(text="reviewed by the auditor"))
        await balanced.aclose()
        for sid, stop in (("crashed", CRASH_STOP), ("repaired", CRASH_STOP)):
            session = await store.create(sid)
            await run.play(session, stop)
            if sid == "repaired":
                await repair(session)
            await session.aclose()
        opened = await store.create("open")
        await run.play(opened, first_turn + 1)
        await opened.aclose()
        corrupt = await store.create("corrupt")
        await run.play(corrupt)
        await corrupt.aclose()


def corrupt_event(path: Path, session_id: str, seq: int) -> None:
    """Change one character of a stored payload, keeping it valid JSON (a hash mismatch)."""
    with sqlite3.connect(path) as db:
        (data,) = db.execute(
            "SELECT data FROM events WHERE session_id = ? AND seq = ?", (session_id, seq)
        ).fetchone()
        text = data.decode() if isinstance(data, bytes) else data
        altered = text.replace(":1", ":7", 1) if ":1" in text else text + " "
        assert altered != text
        db.execute(
            "UPDATE events SET data = ? WHERE session_id = ? AND seq = ?",
            (altered, session_id, seq),
        )
    db.close()


def build_runs_db(path: Path) -> Path:
    """Write the fixture file at ``path`` and return it."""
    anyio.run(_build, url_of(path), backend="asyncio")
    corrupt_event(path, "corrupt", CORRUPT_SEQ)
    return path


def copy_db(source: Path, target: Path) -> Path:
    """Copy a SQLite store file with its WAL, for a test that changes it."""
    for suffix in ("", "-wal", "-shm"):
        part = Path(f"{source}{suffix}")
        if part.exists():
            shutil.copyfile(part, f"{target}{suffix}")
    return target


def cli(
    *args: str,
    db: Path | str | None = None,
    cwd: Path | None = None,
    stdin: str | None = None,
    **env: str,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m eventlog [--db URL] ARGS`` as a subprocess; ``db`` may be a path."""
    command = [sys.executable, "-m", "eventlog"]
    if db is not None:
        command += ["--db", url_of(db) if isinstance(db, Path) else db]
    environment = {k: v for k, v in os.environ.items() if k != "EVENTLOG_DB"}
    environment.update(env)
    return subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        input=stdin,
        env=environment,
        check=False,
    )


class HeldOpen:
    """A real child process holding a session open for writing (``sqlite_children/writer.py
    stale``): it has the writer lease from construction until :meth:`close`; :meth:`commit_turn`
    makes it append and flush one turn (five events)."""

    def __init__(self, path: Path, session_id: str) -> None:
        writer = Path(__file__).parent / "sqlite_children" / "writer.py"
        self._proc = subprocess.Popen(
            [sys.executable, str(writer), str(path), session_id, "stale"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdout is not None
        assert self._proc.stdout.readline().strip() == "opened"

    def commit_turn(self) -> None:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write("go\n")
        self._proc.stdin.flush()
        assert self._proc.stdout.readline().startswith("flushed")

    def close(self) -> None:
        """Kill the writer (its lease is then a dead process's)."""
        self._proc.kill()
        self._proc.communicate()


_shared: dict[Path, Path] = {}


def shared_runs_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture file, built once per test run (tests that change it work on a copy)."""
    base = tmp_path_factory.getbasetemp()
    if base not in _shared:
        _shared[base] = build_runs_db(tmp_path_factory.mktemp("cli") / "runs.db")
    return _shared[base]


def run_main(*args: str, db: Path | str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``agent.cli.main`` in this process (cheaper than :func:`cli`) with the output
    captured; same result shape as :func:`cli`."""
    from agent.cli import main

    argv = ["--db", url_of(db) if isinstance(db, Path) else db] if db is not None else []
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*argv, *args])
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


@tool
def boom() -> str:
    """Always raises."""
    raise RuntimeError("the disk is on fire")


@tool
def typed(n: int) -> str:
    """Takes a number."""
    return str(n)


@tool
def quota() -> ToolOutput:
    """Reports its own error code."""
    return ToolOutput(content="over quota", is_error=True, error_code="E_QUOTA")


#: Calls of the ``failures`` session: each tool fails its own way, with the code it records.
FAILED_CALLS = {
    "boom": "TOOL_FAILED",
    "nosuch": "UNKNOWN_TOOL",
    "typed": "INVALID_ARGUMENTS",
    "quota": "E_QUOTA",
}


async def play_failures(url: str, session_id: str = "failures") -> None:
    """A real agent run whose tools fail four ways (raises, unknown, invalid arguments, its own
    error code) after one failed model attempt, then finishes (see :func:`run_failures`)."""
    async with open_store(url) as store:
        session = await store.create(session_id)
        await run_failures(session)
        await session.aclose()


async def run_failures(session: Session) -> None:
    """The run of :func:`play_failures` on an open session."""
    script = [
        Response(text="x", fail_after=0, error="upstream 503"),
        Response(
            tool_calls=[("boom", "{}"), ("nosuch", "{}"), ("typed", '{"n": "x"}'), ("quota", "{}")]
        ),
        Response(text="All four failed.", usage=Usage(input_tokens=120, output_tokens=4)),
    ]
    agent = Agent(
        session, ScriptedModel(script), [boom, typed, quota], retry=RetryPolicy(initial_delay=0)
    )
    await agent.prompt("Try everything.", request_id="r1")
    await agent.run_until_idle()


def drop_users_reply(request: ModelRequest) -> Response:
    """A model that asks to drop ``users`` with the tool ``drop_table``, then, once the call is
    answered (whoever runs it: the agent, or a decision made by the command), is done."""
    if request.messages[-1].role == "tool":
        return Response(text="Done.")
    return Response(tool_calls=[("drop_table", '{"name": "users"}')])


async def waiting_for_approval(db: Path, session_id: str, drop_table: Tool) -> str:
    """A new session in ``db`` whose turn waits for a decision on one ``drop_table`` call (the
    caller's tool, declared with ``approval=True``); returns the call id."""
    async with open_store(url_of(db)) as store:
        session = await store.create(session_id=session_id)
        agent = Agent(session, ScriptedModel(drop_users_reply), [drop_table])
        agent.followup("drop users")
        await agent.run_until_idle()
        (pending,) = await agent.pending_approvals()
        await agent.session.aclose()
        return pending.call_id
