"""``eventlog approvals``, ``approve``, ``deny`` and what ``audit`` says of approvals, on a real
SQLite file: a decision made by the command (another process) lets the agent go on; a live
agent holding the session refuses the command with a clear message; refusals commit nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent import TOOL_DENIED, Agent, ScriptedModel, tool
from eventlog import open_store
from tests.cli_fixtures import cli, drop_users_reply, run_main, url_of, waiting_for_approval

ASKED: list[str] = []


@tool(approval=True)
def drop_table(name: str) -> str:
    """Drop a table."""
    ASKED.append(name)
    return f"dropped {name}"


def _model() -> ScriptedModel:
    return ScriptedModel(drop_users_reply)


async def _waiting(db: Path, session_id: str) -> str:
    """A session whose turn waits for a decision on one call; returns the call id."""
    return await waiting_for_approval(db, session_id, drop_table)


async def _go_on(db: Path, session_id: str) -> list[str]:
    async with open_store(url_of(db)) as store:
        agent = await Agent.resume(store, session_id, _model(), [drop_table])
        outcomes: list[str] = [o.reason for o in await agent.run_until_idle()]
        await agent.session.aclose()
        return outcomes


def test_approvals_lists_audits_and_decides_across_sessions(tmp_path: Path) -> None:
    db = tmp_path / "approvals.db"
    first = anyio.run(_waiting, db, "alpha")
    second = anyio.run(_waiting, db, "beta")

    # Both wait: listed as pending, with the seq that asked.
    listed = json.loads(cli("approvals", "--pending", "--json", db=db).stdout)["approvals"]
    assert [(r["session"], r["call_id"], r["state"]) for r in listed] == [
        ("alpha", first, "awaiting approval"),
        ("beta", second, "awaiting approval"),
    ]
    assert all(r["requested"] is not None and r["name"] == "drop_table" for r in listed)

    # A waiting session is an audit finding (exit 1), and neither crashed nor needing repair.
    audit = run_main("audit", "alpha", db=db)
    assert audit.returncode == 1
    assert "awaiting a decision" in audit.stdout and "awaiting approval: turn 1" in audit.stdout
    assert "needs repair" not in audit.stdout
    recover = json.loads(run_main("recover", "alpha", "--json", db=db).stdout)
    assert recover["needs_repair"] is False
    assert recover["dangling"][0]["kind"] == "awaiting-approval"
    assert [c["call_id"] for c in recover["awaiting_approval"]] == [first]
    told = run_main("recover", "alpha", db=db)
    assert told.returncode == 0
    assert "awaiting approval: 1 call waiting for a decision" in told.stdout

    # Decide from another process (the command), each way.
    approved = cli("approve", "alpha", first, "--by", "ana", "--reason", "backed up", db=db)
    assert approved.returncode == 0, approved.stderr
    assert f"approved: call {first} of session alpha" in approved.stdout
    denied = cli("deny", "beta", second, "--by", "bo", "--reason", "prod", "--json", db=db)
    assert denied.returncode == 0, denied.stderr
    record = json.loads(denied.stdout)
    assert (record["decision"], record["by"], record["reason"]) == ("deny", "bo", "prod")

    # A second, different decision is refused naming the first; nothing is written.
    again = cli("deny", "alpha", first, "--by", "bo", db=db)
    assert again.returncode == 2 and "already decided 'approve'" in again.stderr
    unknown = cli("approve", "alpha", "nope", "--by", "bo", db=db)
    assert unknown.returncode == 2 and "unknown call id" in unknown.stderr
    assert json.loads(cli("approvals", "--pending", "--json", db=db).stdout)["approvals"] == []

    # The agents go on: the approved call runs, the denied one never does.
    assert anyio.run(_go_on, db, "alpha") == ["completed"]
    assert anyio.run(_go_on, db, "beta") == ["completed"]
    assert ASKED.count("users") == 1
    rows = json.loads(cli("approvals", "--json", db=db).stdout)["approvals"]
    assert [(r["session"], r["state"], r["by"]) for r in rows] == [
        ("alpha", "approved", "ana"),
        ("beta", "denied", "bo"),
    ]
    beta = json.loads(run_main("audit", "beta", "--json", db=db).stdout)
    (call,) = beta["calls"]
    assert call["outcome"] == "denied" and call["error"]["code"] == TOOL_DENIED
    assert call["approval"]["by"] == "bo" and call["approval"]["decided"] == call["seqs"]["decided"]


async def _hold_waiting(db: Path, ready: anyio.Event, done: anyio.Event) -> None:
    async with open_store(url_of(db)) as store:
        agent = Agent(await store.create(session_id="held"), _model(), [drop_table])
        agent.followup("drop users")
        await agent.run_until_idle()
        ready.set()
        await done.wait()
        await agent.session.aclose()


@pytest.mark.anyio
async def test_a_live_agent_holding_the_session_refuses_the_command(tmp_path: Path) -> None:
    db = tmp_path / "held.db"
    ready, done = anyio.Event(), anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_hold_waiting, db, ready, done)
        await ready.wait()
        call_id = (
            json.loads(
                (await anyio.to_thread.run_sync(lambda: cli("approvals", "--json", db=db))).stdout
            )["approvals"]
        )[0]["call_id"]
        refused = await anyio.to_thread.run_sync(
            lambda: cli("approve", "held", call_id, "--by", "ana", db=db)
        )
        done.set()
    assert refused.returncode == 2
    assert "held by a live agent" in refused.stderr
    assert "approve through that agent" in refused.stderr


def test_the_web_page_and_the_trace_show_each_approval(tmp_path: Path) -> None:
    from opentelemetry.trace import StatusCode
    from starlette.testclient import TestClient

    from agent.otel import session_spans
    from agent.web import create_app

    db = tmp_path / "shown.db"
    pending = anyio.run(_waiting, db, "pending")
    denied = anyio.run(_waiting, db, "denied")
    assert cli("deny", "denied", denied, "--by", "bo", "--reason", "prod", db=db).returncode == 0
    assert anyio.run(_go_on, db, "denied") == ["completed"]

    # The page: the decision, who, and the seqs; a waiting call says since when.
    with TestClient(create_app(url_of(db)), base_url="http://localhost") as client:
        page = client.get("/s/denied").text
        assert 'data-decision="deny"' in page and "denied by bo at" in page and ": prod" in page
        assert "requested=" in page and "decided=" in page
        waiting = client.get("/s/pending").text
        assert 'data-decision="pending"' in waiting and "awaiting a decision since" in waiting
        listed = client.get("/", params={"state": "awaiting approval"}).text
        assert "/s/pending" in listed and "/s/denied" not in listed

    async def spans(session_id: str) -> dict[str, dict[str, Any]]:
        async with open_store(url_of(db)) as store:
            session = await store.open(session_id, salvage=True)
            found: dict[str, dict[str, Any]] = {
                s.name: {**dict(s.attributes or {}), "status": s.status.status_code}
                for s in session_spans(session)
            }
            await session.aclose()
            return found

    # The trace: an await_approval span from question to decision, the decision on the call's
    # span, which is not an error (a person's decision is not a failure).
    traced = anyio.run(spans, "denied")
    asked = traced["await_approval drop_table"]
    assert (asked["eventlog.approval.decision"], asked["eventlog.approval.by"]) == ("deny", "bo")
    assert asked["eventlog.seqs.requested"] < asked["eventlog.seqs.decided"]
    tool_span = traced["execute_tool drop_table"]
    assert tool_span["eventlog.fate"] == "denied" and tool_span["status"] != StatusCode.ERROR
    assert tool_span["eventlog.approval.by"] == "bo"
    still = anyio.run(spans, "pending")["await_approval drop_table"]
    assert still["eventlog.open"] is True and "eventlog.approval.decision" not in still
    assert pending
