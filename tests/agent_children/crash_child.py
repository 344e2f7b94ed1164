"""A child process that runs a scripted agent on a SQLite session until it is killed.

Every tool body first appends its call id to a marker file (one ``write`` on an ``O_APPEND``
descriptor: it survives the process being killed), so the parent can check after a SIGKILL
that no call whose body started is ever reported to the model as not started.

Run it forked from a test (:func:`child_main`, cheap) or as a script::

    python -m tests.agent_children.crash_child sqlite:///x.db SESSION_ID SEED MARKER
"""

from __future__ import annotations

import os
import random
import sys
import uuid
from collections.abc import Mapping
from typing import Any, NoReturn

import anyio
import msgspec

from agent import (
    Agent,
    ModelRequest,
    Response,
    RetryPolicy,
    ScriptedModel,
    ToolArgumentsError,
    ToolContext,
    ToolOutput,
)
from eventlog import SessionNotFoundError, ToolCallPart, open_store


class Work:
    """A tool whose body records that it started, then works for ``ms`` milliseconds."""

    name = "work"
    description = "do some work"
    parameters: Mapping[str, Any] = {"type": "object"}

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def decode(self, arguments: str) -> Any:
        try:
            return msgspec.json.decode(arguments)
        except msgspec.DecodeError as exc:
            raise ToolArgumentsError(str(exc)) from exc

    def is_concurrency_safe(self, args: Any) -> bool:
        return bool(args.get("safe"))

    async def call(self, args: Any, context: ToolContext) -> ToolOutput:
        fd = os.open(self.marker, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{context.call_id}\n".encode())
        finally:
            os.close(fd)
        await anyio.sleep(args.get("ms", 0) / 1000)
        return ToolOutput(content=f"worked {args.get('ms', 0)} ms")


def script(rng: random.Random) -> Any:
    """A model that keeps a turn going with tools for a while, then stops."""

    def reply(request: ModelRequest) -> Response:
        last = request.messages[-1] if request.messages else None
        if rng.random() < 0.05:
            return Response(finish="error", error="overloaded", chunk_delay=0.0005)
        if last is not None and last.role == "tool" and rng.random() < 0.4:
            return Response(text="All done. " * rng.randint(1, 4), chunk_delay=0.0005)
        calls = [
            ToolCallPart(
                id=f"call-{uuid.uuid4().hex[:10]}",
                name="work",
                arguments=msgspec.json.encode(
                    {"safe": rng.random() < 0.6, "ms": rng.choice([0, 1, 3, 8])}
                ).decode(),
            )
            for _ in range(rng.randint(1, 4))
        ]
        return Response(text="Working on it.", tool_calls=calls, chunk_delay=0.0005)

    return reply


async def run(url: str, session_id: str, seed: int, marker: str, ready_fd: int = -1) -> None:
    """Resume (or create) the session and run prompts until killed (or 200 turns).

    Writes one byte to ``ready_fd`` (when given) once the agent is constructed.
    """
    rng = random.Random(seed)
    model = ScriptedModel(script(rng))
    options: dict[str, Any] = {
        "max_parallel": rng.choice([1, 2, 4]),
        "retry": RetryPolicy(initial_delay=0),
    }
    async with open_store(url) as store:
        try:
            agent = await Agent.resume(store, session_id, model, [Work(marker)], **options)
        except SessionNotFoundError:
            session = await store.create(session_id=session_id)
            agent = Agent(session, model, [Work(marker)], **options)
        if ready_fd >= 0:
            os.write(ready_fd, b"r")
        for n in range(200):
            await agent.prompt(f"task {seed}-{n}", request_id=f"{seed}-{n}")
            await agent.run_until_idle()


def child_main(url: str, session_id: str, seed: int, marker: str, ready_fd: int = -1) -> NoReturn:
    """Entry point of a forked child: run, and never return into the parent's code."""
    code = 0
    try:
        anyio.run(run, url, session_id, seed, marker, ready_fd)
    except BaseException:
        code = 1
    os._exit(code)


if __name__ == "__main__":
    child_main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
