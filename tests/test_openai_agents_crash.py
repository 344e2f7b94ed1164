"""A real SDK agent SIGKILLed inside a tool body, then run again in a new process.

The SDK adds a model reply and its tool outputs to the session only after the tool returns,
so a ``SQLiteSession`` keeps nothing of the call and the model calls the tool again. On
``EventlogSession`` with ``EventlogHooks`` the call was logged and flushed before the body ran:
the next run's first request answers it with ``TOOL_OUTCOME_UNKNOWN`` and the body does not run
a second time.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from agent.cli import main as cli
from recovery import outcome_unknown_text
from tests.llm_server import LLMServer
from tests.openai_agents_children.support import completion

ROOT = Path(__file__).resolve().parent.parent


def run_child(
    db: str, url: str, text: str, marker: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tests.openai_agents_children.run", db, url, text, str(marker)]
    return subprocess.run([*command, *extra], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_a_call_killed_in_its_body_is_answered_not_repeated(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'sessions.db'}"
    marker = tmp_path / "sent.txt"
    call = ("call_1", "send_email", {"to": "bob"})
    with LLMServer(completion(calls=[call]), completion(text="I could not confirm it.")) as server:
        # The first process: the model asks for the tool; the process dies inside its body.
        first = run_child(db, server.url, "Email bob.", marker, "kill")
        assert first.returncode == -signal.SIGKILL, first.stderr
        assert marker.read_text() == "sent to bob\n"

        # A new process runs the agent again on the same session.
        second = run_child(db, server.url, "Did it work?", marker)
        assert second.returncode == 0, second.stderr
        assert second.stdout.strip() == "I could not confirm it."

        # The model's next request holds the call and its honest answer, then the new input.
        messages = server.bodies[1]["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "user"]
    assert messages[2]["tool_calls"][0]["id"] == "call_1"
    assert messages[3] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": outcome_unknown_text("send_email", "call_1"),
    }
    # The tool body ran once: the model was told, not left to repeat it.
    assert marker.read_text() == "sent to bob\n"
    # The eventlog command reads the session: it verifies, and audit classes the call.
    assert cli(["--db", db, "verify", "conversation-1"]) == 0
    # audit fails the run (exit 1): the killed call's outcome is unknown, its turn was cut.
    assert cli(["--db", db, "audit", "conversation-1"]) == 1
