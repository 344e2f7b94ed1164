"""A step whose decisions are all made waits for its agent; it does not need repair.

Right after ``eventlog approve`` (or ``deny``) made the step's last decision, and before the
agent came back, the session is ``awaiting agent`` for ``sessions``, ``audit`` and ``recover``
(never ``needs repair``), and ``recover --apply`` appends nothing: repairing it would answer an
approved call ``TOOL_NOT_STARTED`` and the model would ask the person again. The agent then
goes on (``Agent.resume`` + ``run_until_idle()``): the approved call runs once and nobody is
asked twice; a denied call is answered ``TOOL_DENIED`` by the agent itself. A real SIGKILL
inside the approved body (its ``tool/call`` logged, no outcome) is a crash again: ``needs
repair``, and repair answers the call ``TOOL_OUTCOME_UNKNOWN``. Real SQLite files; the
commands that write run in a subprocess."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent import TOOL_DENIED, Agent, ScriptedModel, tool
from eventlog import Event, open_store
from recovery import TOOL_OUTCOME_UNKNOWN, scan
from recovery.testing import check_invariants
from tests.cli_fixtures import cli, drop_users_reply, run_main, url_of, waiting_for_approval

ROOT = Path(__file__).resolve().parent.parent
RAN: list[str] = []


@tool(approval=True)
def drop_table(name: str) -> str:
    """Drop a table."""
    RAN.append(name)
    return f"dropped {name}"


async def _waiting(db: Path, session_id: str) -> str:
    """A session whose turn waits for a decision on one call; returns the call id."""
    return await waiting_for_approval(db, session_id, drop_table)


async def _go_on(db: Path, session_id: str) -> list[str]:
    async with open_store(url_of(db)) as store:
        agent = await Agent.resume(store, session_id, ScriptedModel(drop_users_reply), [drop_table])
        report = agent.repair_report
        assert report is not None and not report.repaired  # gone on, never repaired
        outcomes: list[str] = [o.reason for o in await agent.run_until_idle()]
        await agent.session.aclose()
        return outcomes


async def _events(db: Path, session_id: str) -> list[Event]:
    """The session's events, once every invariant is checked on it."""
    async with open_store(url_of(db)) as store:
        session = await store.open(session_id)
        try:
            check_invariants(session)  # a decided step is settled, like a waiting one
            return list(await session.events())
        finally:
            await session.aclose()


def _rows(db: Path, session_id: str) -> list[tuple[Any, ...]]:
    """The stored events of the session, byte for byte."""
    with sqlite3.connect(db) as conn:
        query = "SELECT * FROM events WHERE session_id = ? ORDER BY seq"
        return list(conn.execute(query, (session_id,)))


def _shows_awaiting_agent(db: Path, session_id: str) -> None:
    """Every command calls the decided session ``awaiting agent``, none ``needs repair``."""
    listed = run_main("sessions", "--json", db=db)
    assert listed.returncode == 0, listed.stdout  # not a finding: nothing is broken
    (row,) = json.loads(listed.stdout)["sessions"]
    assert row["state"] == "awaiting agent"
    assert "awaiting agent" in run_main("sessions", db=db).stdout

    audit = run_main("audit", session_id, db=db)
    # Nothing failed, nobody must decide or repair: the agent goes on at its next run.
    assert audit.returncode == 0, audit.stdout
    assert "awaiting agent: turn 1, step 1" in audit.stdout
    assert "needs repair" not in audit.stdout
    assert json.loads(run_main("audit", session_id, "--json", db=db).stdout)["state"] == (
        "awaiting agent"
    )

    doc = json.loads(run_main("recover", session_id, "--json", db=db).stdout)
    assert (doc["needs_repair"], doc["awaiting_agent"], doc["awaiting_approval"]) == (
        False,
        True,
        [],
    )
    told = run_main("recover", session_id, db=db)
    assert told.returncode == 0
    assert "awaiting agent: every decision the step asked for is made" in told.stdout
    assert "--apply" not in told.stdout

    anyio.run(_events, db, session_id)  # the invariants hold: a decided step is not "open"
    before = _rows(db, session_id)
    applied = cli("recover", session_id, "--apply", "--json", db=db)
    assert applied.returncode == 0, applied.stderr
    assert json.loads(applied.stdout)["appended"] == []
    assert _rows(db, session_id) == before  # not one event written


def test_an_approved_step_waits_for_its_agent_and_its_call_runs_once(tmp_path: Path) -> None:
    db = tmp_path / "approved.db"
    RAN.clear()
    call_id = anyio.run(_waiting, db, "alpha")
    approved = cli("approve", "alpha", call_id, "--by", "ana", db=db)
    assert approved.returncode == 0, approved.stderr

    _shows_awaiting_agent(db, "alpha")

    # The agent comes back: the approved call runs once, and nobody is asked again.
    assert anyio.run(_go_on, db, "alpha") == ["completed"]
    assert RAN == ["users"]
    events = anyio.run(_events, db, "alpha")
    assert [e.data.call_id for e in events if e.type == "tool/approval-request"] == [call_id]
    (result,) = [e.data for e in events if e.type == "tool/result"]
    assert result.error is None and result.message.tool_results[0].content == "dropped users"
    assert json.loads(run_main("sessions", "--json", db=db).stdout)["sessions"][0]["state"] == (
        "balanced"
    )


def test_a_denied_step_waits_for_its_agent_which_answers_it_denied(tmp_path: Path) -> None:
    db = tmp_path / "denied.db"
    RAN.clear()
    call_id = anyio.run(_waiting, db, "beta")
    denied = cli("deny", "beta", call_id, "--by", "bo", "--reason", "prod", db=db)
    assert denied.returncode == 0, denied.stderr

    _shows_awaiting_agent(db, "beta")

    assert anyio.run(_go_on, db, "beta") == ["completed"]
    assert RAN == []
    events = anyio.run(_events, db, "beta")
    assert [e.data.call_id for e in events if e.type == "tool/approval-request"] == [call_id]
    (result,) = [e.data for e in events if e.type == "tool/result"]
    assert result.error is not None and result.error.code == TOOL_DENIED
    source = result.message.source
    assert source is None or source.kind != "recovery"  # the agent answered it, not repair
    assert "prod" in result.message.tool_results[0].content


def _life(db: Path, life: str, kill: str, marker: Path) -> bool:
    """One life of ``tests/agent_children/approval_child.py``; True when it was SIGKILLed."""
    argv = [sys.executable, "-m", "tests.agent_children.approval_child"]
    argv += [url_of(db), "s", life, kill, "approve", str(marker)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    if done.returncode == -signal.SIGKILL:
        return True
    assert done.returncode == 0, f"{life} (kill {kill}) failed:\n{done.stderr}"
    return False


@pytest.mark.timeout(300)
def test_a_crash_inside_the_approved_body_still_needs_repair(tmp_path: Path) -> None:
    db, marker = tmp_path / "crash.db", tmp_path / "began"
    assert not _life(db, "ask", "none", marker)  # g1 waits for a decision, f1 ran
    listed = json.loads(run_main("approvals", "--pending", "--json", db=db).stdout)["approvals"]
    assert [r["call_id"] for r in listed] == ["g1"]
    assert cli("approve", "s", "g1", "--by", "ana", db=db).returncode == 0
    assert json.loads(run_main("sessions", "--json", db=db).stdout)["sessions"][0]["state"] == (
        "awaiting agent"
    )

    # The agent comes back and is killed inside the approved body: its effect is unknown.
    assert _life(db, "run", "guarded-body", marker)
    assert marker.read_text().splitlines() == ["free f1", "guarded g1"]
    listed_after = run_main("sessions", "--json", db=db)
    assert listed_after.returncode == 1
    assert json.loads(listed_after.stdout)["sessions"][0]["state"] == "needs repair"
    doc = json.loads(run_main("recover", "s", "--json", db=db).stdout)
    assert (doc["needs_repair"], doc["awaiting_agent"]) == (True, False)
    # g1 may have run; f1 (no decision needed) ran in the first life, its outcome logged.
    kinds = [(d["call_id"], d["kind"]) for d in doc["dangling"]]
    assert kinds == [("g1", "outcome-unknown"), ("f1", "recovered")]

    applied = cli("recover", "s", "--apply", db=db)
    assert applied.returncode == 0, applied.stderr
    events = anyio.run(_events, db, "s")
    answers = {
        e.data.message.tool_results[0].call_id: e.data.error.code if e.data.error else None
        for e in events
        if e.type == "tool/result"
    }
    assert answers == {"f1": None, "g1": TOOL_OUTCOME_UNKNOWN}
    assert [e.data.reason for e in events if e.type == "turn/end"] == ["interrupted"]
    assert marker.read_text().splitlines() == ["free f1", "guarded g1"]  # nothing ran again


def test_the_web_app_lists_and_shows_the_decided_session(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from agent.web import create_app

    db = tmp_path / "web.db"
    call_id = anyio.run(_waiting, db, "decided")
    anyio.run(_waiting, db, "pending")
    assert cli("approve", "decided", call_id, "--by", "ana", db=db).returncode == 0
    with TestClient(create_app(url_of(db)), base_url="http://localhost") as client:
        listed = client.get("/", params={"state": "awaiting agent"}).text
        assert "/s/decided" in listed and "/s/pending" not in listed
        assert '<option value="awaiting agent" selected>' in listed  # a state to filter by
        page = client.get("/s/decided").text
        assert 'class="state state-awaiting-agent" id="state">awaiting agent<' in page
        assert "needs repair" not in page


def test_scan_follows_the_agent_rule_on_the_decided_step(tmp_path: Path) -> None:
    """The diagnosis itself: decided and not started is awaiting its agent, not clean."""
    db = tmp_path / "scan.db"
    call_id = anyio.run(_waiting, db, "gamma")
    assert cli("approve", "gamma", call_id, "--by", "ana", db=db).returncode == 0

    async def diagnose() -> tuple[bool, bool, bool]:
        async with open_store(url_of(db)) as store:
            session = await store.open("gamma")
            try:
                found = scan(session)
                return found.awaiting_agent, found.needs_repair, found.clean
            finally:
                await session.aclose()

    assert anyio.run(diagnose) == (True, False, False)
