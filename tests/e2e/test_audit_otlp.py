"""``eventlog export --format otlp`` into a real OTLP/HTTP receiver on loopback (Phoenix's
``phoenix serve``), read back through its REST API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from ..cli_fixtures import FAILED_CALLS, build_runs_db, cli, play_failures, url_of
from .audit_support import phoenix

pytestmark = pytest.mark.e2e


def spans_in(base: str) -> list[dict[str, Any]]:
    """Every span Phoenix stored in its default project (its REST API, paged)."""
    spans: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 100}
        if cursor:
            params["cursor"] = cursor
        reply = httpx2.get(f"{base}/v1/projects/default/spans", params=params, timeout=30)
        reply.raise_for_status()
        page = reply.json()
        spans += page["data"]
        cursor = page.get("next_cursor")
        if not cursor:
            return spans


def test_sessions_exported_into_phoenix_come_back_as_their_spans(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    db = build_runs_db(tmp_path_factory.mktemp("otlp") / "runs.db")
    anyio.run(play_failures, url_of(db))
    with phoenix(tmp_path_factory.mktemp("phoenix")) as base:
        # Two sessions, sent by the real command to the receiver's OTLP/HTTP endpoint.
        for sid, count in (("failures", 8), ("repaired", 5)):
            sent = cli("export", sid, "--format", "otlp", "--endpoint", f"{base}/v1/traces", db=db)
            assert sent.returncode == 0, sent.stderr
            assert sent.stdout == f"sent session {sid}: {count} spans to {base}/v1/traces\n"
        # Read back: every span, under its session, with its parent, status and codes.
        stored = spans_in(base)
        by_session: dict[str, list[dict[str, Any]]] = {}
        for span in stored:
            by_session.setdefault(span["attributes"]["gen_ai.conversation.id"], []).append(span)
        assert {k: len(v) for k, v in by_session.items()} == {"failures": 8, "repaired": 5}
        failures = {s["name"]: s for s in by_session["failures"]}
        root = failures["invoke_agent"]
        assert root["parent_id"] is None
        for name, code in FAILED_CALLS.items():
            tool = failures[f"execute_tool {name}"]
            assert tool["parent_id"] == root["context"]["span_id"]
            assert tool["status_code"] == "ERROR"
            assert tool["attributes"]["error.type"] == code
            assert (
                tool["attributes"]["eventlog.seqs.result"]
                > tool["attributes"]["eventlog.seq.start"]
            )
        repaired = [s for s in by_session["repaired"] if s["name"].startswith("execute_tool")]
        codes = sorted(s["attributes"].get("error.type", "") for s in repaired)
        assert codes == ["", "TOOL_NOT_STARTED", "TOOL_OUTCOME_UNKNOWN"]
        turn = next(s for s in by_session["repaired"] if s["name"] == "invoke_agent")
        assert turn["status_code"] == "ERROR" and turn["attributes"]["error.type"] == "interrupted"


def test_a_receiver_that_is_not_there_is_an_error(tmp_path: Path) -> None:
    from .audit_support import free_port

    db = build_runs_db(tmp_path / "runs.db")
    endpoint = f"http://127.0.0.1:{free_port()}/v1/traces"
    result = cli("export", "balanced", "--format", "otlp", "--endpoint", endpoint, db=db)
    assert result.returncode == 2
    assert f"cannot reach the OTLP receiver at {endpoint}" in result.stderr
    assert result.stderr.count("\n") == 1  # one line: no retry noise
