"""One exit-code rule for every command, checked on a real crashed run (docs/cli.md).

0: intact and nothing owed. 1: a finding — a damaged log, a session that needs repair (a turn
open with no live writer), and for ``audit`` also a call whose outcome is unknown, a failed
call or attempt, a turn that failed or a crash cut. ``sessions`` says the same words.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .cli_fixtures import run_main as cli  # in-process: the same main(), cheaper
from .cli_fixtures import shared_runs_db, url_of

#: An agent whose one tool announces it started, then hangs until the process is killed.
CHILD = """
import sys, anyio
from agent import Agent, Response, ScriptedModel, tool
from eventlog import open_store

@tool
async def deploy() -> str:
    '''Deploys (and never returns: the process is killed here).'''
    print("in tool", flush=True)
    await anyio.sleep_forever()
    return "deployed"

async def main() -> None:
    async with open_store(sys.argv[1]) as store:
        session = await store.create("run-1")
        model = ScriptedModel([Response(tool_calls=[("deploy", "{}")]), Response(text="ok")])
        agent = Agent(session, model, [deploy])
        await agent.prompt("Deploy it.", request_id="r1")
        await agent.run_until_idle()

anyio.run(main)
"""


def codes(db: Path, session_id: str) -> dict[str, int]:
    """The exit code of each command that judges one session (``sessions`` judges them all:
    it is asked only where the store holds this one)."""
    return {
        "audit": cli("audit", session_id, db=db).returncode,
        "recover": cli("recover", session_id, db=db).returncode,
        "verify": cli("verify", session_id, db=db).returncode,
    }


def state_of(db: Path, session_id: str) -> str:
    rows = json.loads(cli("sessions", "--json", db=db).stdout)["sessions"]
    return str({row["id"]: row["state"] for row in rows}[session_id])


def test_a_crashed_run_fails_every_gate_until_repaired_and_audit_remembers(
    tmp_path: Path,
) -> None:
    db = tmp_path / "crash.db"
    # A real agent process runs a tool and is killed inside its body.
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, url_of(db)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "in tool"  # the body started
    child.kill()
    child.communicate()
    # Every command that judges the session fails it; verify checks only the hash chain,
    # which the crash left intact (it says so and exits 0).
    assert state_of(db, "run-1") == "needs repair"
    assert cli("sessions", db=db).returncode == 1
    assert codes(db, "run-1") == {"audit": 1, "recover": 1, "verify": 0}
    audit = json.loads(cli("audit", "run-1", "--json", db=db).stdout)
    assert [c["outcome"] for c in audit["calls"]] == ["outcome unknown"]
    # Repaired: nothing is owed any more, but audit still fails the run: the deploy's outcome
    # is unknown and the turn was cut by the crash (a CI gate on audit must not pass it).
    assert cli("recover", "run-1", "--apply", db=db).returncode == 0
    assert state_of(db, "run-1") == "balanced"
    assert cli("sessions", db=db).returncode == 0
    assert codes(db, "run-1") == {"audit": 1, "recover": 0, "verify": 0}
    audit = json.loads(cli("audit", "run-1", "--json", db=db).stdout)
    assert [c["outcome"] for c in audit["calls"]] == ["outcome unknown"]
    assert [t["reason"] for t in audit["failed_turns"]] == ["interrupted"]
    text = cli("audit", "run-1", db=db).stdout
    assert "outcome unknown" in text and "turn 1 ended interrupted" in text


def test_an_open_turn_between_steps_is_one_verdict(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # The fixture's `open`: a run cut right after its turn/start (no call is owed).
    db = shared_runs_db(tmp_path_factory)
    assert state_of(db, "open") == "needs repair"
    assert codes(db, "open") == {"audit": 1, "recover": 1, "verify": 0}
    audit = cli("audit", "open", db=db)
    assert "needs repair: turn 1 is open and nobody is writing" in audit.stdout


def test_a_finished_run_passes_every_gate(tmp_path_factory: pytest.TempPathFactory) -> None:
    db = shared_runs_db(tmp_path_factory)
    assert state_of(db, "balanced") == "balanced"
    for command in ("audit", "recover", "verify"):
        assert cli(command, "balanced", db=db).returncode == 0, command
    assert json.loads(cli("audit", "balanced", "--json", db=db).stdout)["failed_turns"] == []


def test_a_call_in_flight_of_a_live_session_is_in_progress_not_a_finding(tmp_path: Path) -> None:
    import anyio

    from eventlog import (
        APPEND,
        AssistantMessage,
        Message,
        StepStart,
        ToolCall,
        ToolCallPart,
        TurnStart,
        open_store,
    )

    db = tmp_path / "live.db"

    async def scenario() -> tuple[dict[str, Any], int, dict[str, Any], int]:
        async with open_store(url_of(db)) as store:
            # A live agent has flushed a tool/call and is running its body.
            session = await store.create(session_id="live")
            session.append("turn/start", TurnStart(turn=1))
            session.append("step/start", StepStart(turn=1, step=1))
            call = ToolCallPart(id="c1", name="deploy", arguments="{}")
            reply = Message.assistant("deploying", tool_calls=(call,))
            session.append(
                "assistant/message",
                AssistantMessage(turn=1, step=1, message=reply, finish="tool-calls"),
                surface=APPEND,
            )
            session.append(
                "tool/call", ToolCall(turn=1, step=1, call_id="c1", name="deploy", arguments="{}")
            )
            await session.flush()
            # An auditor reads beside it: work in progress, nothing to report.
            live = await anyio.to_thread.run_sync(lambda: cli("audit", "live", "--json", db=db))
            # The agent's process lets go without answering (as a crash would leave it).
            await session.aclose()
        after = await anyio.to_thread.run_sync(lambda: cli("audit", "live", "--json", db=db))
        return (
            json.loads(live.stdout),
            live.returncode,
            json.loads(after.stdout),
            after.returncode,
        )

    live, live_code, after, after_code = anyio.run(scenario)
    assert live["state"] == "running" and live_code == 0
    assert [c["outcome"] for c in live["calls"]] == ["in progress"]
    # Nobody holds it now: the call may have run, and nobody knows its effect.
    assert after["state"] == "needs repair" and after_code == 1
    assert [c["outcome"] for c in after["calls"]] == ["outcome unknown"]
