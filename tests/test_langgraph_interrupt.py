"""``interrupt()`` and ``Command(resume=...)`` across a process restart.

A child runs a real graph until its ``approve`` node pauses for a person before a money
transfer, then dies by SIGKILL while the pause waits. A new process finds the pending
interrupt in the stored thread and resumes with the person's answer: approved, the transfer
runs once; denied, it never runs and the model hears why.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHILD = "tests.langgraph_children.approval"


def _child(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", CHILD, *map(str, args)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    ("answer", "ledger", "last"),
    [("approve", ["transfer 50 bob"], "paid"), ("deny", [], "not paid")],
)
def test_a_pause_for_a_person_survives_a_kill_and_resumes_in_a_new_process(
    tmp_path: Path, answer: str, ledger: list[str], last: str
) -> None:
    db, report = tmp_path / "approvals.db", tmp_path / "report.json"
    waiting = _child("wait", db)
    assert waiting.returncode == -signal.SIGKILL, waiting.stderr
    asked = json.loads(waiting.stdout)
    assert asked[0]["question"] == "approve the transfer?"
    assert not (tmp_path / "approvals.db.ledger").exists()  # nothing ran before the answer

    answered = _child("answer", db, answer, report)
    assert answered.returncode == 0, answered.stderr
    found = json.loads(report.read_text())
    # The new process found the pause as the killed one left it ...
    assert found["next_before"] == ["approve"]
    assert found["pending"] == asked
    # ... and the person's answer decided the call: run once, or never.
    assert found["ledger"] == ledger
    assert found["messages"][-1] == ["ai", last]
    tool_messages = [content for kind, content in found["messages"] if kind == "tool"]
    assert tool_messages == (
        ["sent 50 EUR to bob"] if answer == "approve" else ["denied by a person"]
    )
