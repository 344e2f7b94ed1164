"""Test tools shared by the agent tests and their child processes.

:class:`Probe` is a tool whose calls record when they start and finish, track how many run at
once, and can be held at a gate until the test releases them. :func:`events_of` picks a
session's events of one type. :func:`kill_once_it_says` runs a child until it prints a line, then
SIGKILLs it.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import msgspec

from agent import ToolArgumentsError, ToolContext, ToolOutput
from eventlog import Event, Session


def kill_once_it_says(command: Sequence[str], line: str, cwd: Path) -> None:
    """Start ``command`` in ``cwd``, block until its first stdout line, SIGKILL it.

    The child prints ``line`` (without its newline) at the moment the test wants it dead; the
    kill happens even if the line differs, then :class:`AssertionError` is raised, as it is if
    the child was not killed by the signal (it exited before)."""
    child = subprocess.Popen(list(command), cwd=cwd, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == f"{line}\n"  # blocks until the child says it
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    assert child.returncode == -signal.SIGKILL


def events_of(session: Session, type_: str) -> list[Event]:
    """The committed events of ``session`` whose type is ``type_``, in seq order."""
    return [e for e in session.window(0) if e.type == type_]


@dataclass
class Tracker:
    """What every probe of one test saw, shared across probes."""

    log: list[tuple[str, str]] = field(default_factory=list)  # ("start"|"finish", call_id)
    running: set[str] = field(default_factory=set)
    exclusive_running: set[str] = field(default_factory=set)
    max_in_flight: int = 0
    overlaps: list[str] = field(default_factory=list)  # violations of exclusivity
    started: dict[str, anyio.Event] = field(default_factory=dict)
    gates: dict[str, anyio.Event] = field(default_factory=dict)

    def started_event(self, call_id: str) -> anyio.Event:
        return self.started.setdefault(call_id, anyio.Event())

    def gate(self, call_id: str) -> anyio.Event:
        return self.gates.setdefault(call_id, anyio.Event())

    def starts(self) -> list[str]:
        return [c for kind, c in self.log if kind == "start"]


class Probe:
    """A tool that records its calls in a :class:`Tracker`.

    Arguments: ``{"n": <any>, "spins": <int checkpoints to yield>, "fail": <bool>,
    "conclude": <bool>}``. A call waits at its gate when the test created one.
    """

    def __init__(self, name: str, tracker: Tracker, *, safe: bool) -> None:
        self.name = name
        self.description = f"probe {name}"
        self.parameters: Mapping[str, Any] = {"type": "object"}
        self.safe = safe
        self.tracker = tracker

    def decode(self, arguments: str) -> Any:
        try:
            value = msgspec.json.decode(arguments or "{}")
        except msgspec.DecodeError as exc:
            raise ToolArgumentsError(f"invalid arguments for tool {self.name!r}: {exc}") from exc
        if not isinstance(value, dict):
            raise ToolArgumentsError(f"invalid arguments for tool {self.name!r}: not an object")
        return value

    def is_concurrency_safe(self, args: Any) -> bool:
        return self.safe

    async def call(self, args: Any, context: ToolContext) -> ToolOutput:
        t, call_id = self.tracker, context.call_id
        if t.exclusive_running or (not self.safe and t.running):
            t.overlaps.append(call_id)
        t.running.add(call_id)
        if not self.safe:
            t.exclusive_running.add(call_id)
        t.max_in_flight = max(t.max_in_flight, len(t.running))
        t.log.append(("start", call_id))
        t.started_event(call_id).set()
        try:
            gate = t.gates.get(call_id)
            if gate is not None:
                await gate.wait()
            for _ in range(int(args.get("spins", 0))):
                await anyio.lowlevel.checkpoint()
            if args.get("fail"):
                raise RuntimeError(f"probe {call_id} failed")
        finally:
            t.running.discard(call_id)
            t.exclusive_running.discard(call_id)
            t.log.append(("finish", call_id))
        return ToolOutput(
            content=f"{self.name} {call_id} ok", concludes_turn=bool(args.get("conclude"))
        )
