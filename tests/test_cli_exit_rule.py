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

import pytest

from .cli_fixtures import HeldOpen, copy_db, shared_runs_db, url_of
from .cli_fixtures import run_main as cli  # in-process: the same main(), cheaper

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


def test_a_live_writers_started_call_is_in_progress_not_a_finding(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    # The crash-cut session (a call started in its open step, no outcome), held by a live
    # writer: that call is the writer's work in progress.
    db = copy_db(shared_runs_db(tmp_path_factory), tmp_path / "runs.db")
    writer = HeldOpen(db, "crashed")
    try:
        live = cli("audit", "crashed", "--json", db=db)
    finally:
        writer.close()
    document = json.loads(live.stdout)
    assert document["state"] == "running"
    # It used to be "outcome unknown", a finding: audit of a healthy live run exited 1.
    fates = {c["call_id"]: c["outcome"] for c in document["calls"]}
    assert fates == {
        "call-1-1-0": "in progress",
        "call-1-1-1": "completed",
        "call-1-1-2": "not started",
    }
    assert live.returncode == 0, live.stderr
    # Once the writer is gone, the same call's effect is unknown: a finding again.
    dead = cli("audit", "crashed", "--json", db=db)
    assert json.loads(dead.stdout)["calls"][0]["outcome"] == "outcome unknown"
    assert dead.returncode == 1
