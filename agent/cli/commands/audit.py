"""``audit``: every tool call with its state, outcome class and proving seqs, plus integrity."""

from __future__ import annotations

import argparse
from typing import Any, Literal

from rich.table import Table
from rich.text import Text

from eventlog import Session, ToolCallPart
from projections import Timeline, ToolCallState, timeline
from recovery import TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN, Diagnosis, scan

from ..context import Context, load_session, open_cli_store
from ..errors import EXIT_FINDINGS, EXIT_OK
from ..render import clip, fault_json
from .base import Command

__all__ = ("AUDIT", "outcome_class")

Outcome = Literal["completed", "not started", "outcome unknown", "recovered"]

#: Result error codes that say the tool body never ran (recovery, or the agent on cancel).
_NOT_STARTED_CODES = frozenset({TOOL_NOT_STARTED, "ABORTED_BEFORE_DISPATCH"})
_UNKNOWN_CODES = frozenset({TOOL_OUTCOME_UNKNOWN})
_OUTCOME_STYLE = {
    "completed": "green",
    "recovered": "cyan",
    "not started": "yellow",
    "outcome unknown": "red",
}


def outcome_class(session: Session, call: ToolCallState) -> Outcome:
    """What is known about a call's effect.

    Answered calls are classed by their ``tool/result``: the error codes recovery (or a cancel)
    writes, a result written by recovery from a logged ``tool/outcome`` (``recovered``), or a
    normal result (``completed``). Unanswered calls are classed the way repair would class them.
    """
    events = session.events()
    if call.result is not None:
        data = events[call.result].data
        code = data.error.code if data.error is not None else None
        if code in _NOT_STARTED_CODES:
            return "not started"
        if code in _UNKNOWN_CODES:
            return "outcome unknown"
        source = data.message.source
        return "recovered" if source is not None and source.kind == "recovery" else "completed"
    if call.outcome is not None:
        return "completed"
    return "outcome unknown" if call.call is not None else "not started"


def _arguments(session: Session, call: ToolCallState) -> str:
    events = session.events()
    if call.call is not None:
        arguments: str = events[call.call].data.arguments
        return arguments
    if call.proposed is not None:
        parts: tuple[ToolCallPart, ...] = events[call.proposed].data.message.tool_calls
        for part in parts:
            if part.id == call.call_id:
                return part.arguments
    return ""


def _call_json(session: Session, call: ToolCallState) -> dict[str, Any]:
    return {
        "turn": call.turn,
        "step": call.step,
        "call_id": call.call_id,
        "name": call.name,
        "arguments": _arguments(session, call),
        "state": call.status,
        "outcome": outcome_class(session, call),
        "seqs": {
            "proposed": call.proposed,
            "call": call.call,
            "outcome": call.outcome,
            "result": call.result,
        },
    }


def _findings(diagnosis: Diagnosis) -> list[dict[str, Any]]:
    """Integrity findings of the scan, and calls left unanswered in steps that ended."""
    found = [{"seq": f.seq, "message": f.message} for f in diagnosis.findings]
    for call in diagnosis.unanswered:
        seq = call.proposed if call.proposed is not None else call.call
        found.append(
            {
                "seq": seq,
                "message": f"seq {seq}: call {call.call_id!r} of step {call.turn}.{call.step} "
                "was never answered and its step has ended",
            }
        )
    return found


async def _run(args: argparse.Namespace, ctx: Context) -> int:
    async with open_cli_store(ctx.url) as store:
        loaded = await load_session(store, args.session_id)
    session = loaded.session
    line = timeline(session)
    calls = [_call_json(session, call) for call in line.calls()]
    findings = _findings(scan(session))
    ok = loaded.fault is None and not findings
    if ctx.out.json_mode:
        ctx.out.json(
            {
                "session": session.id,
                "events": loaded.stored_events,
                "open_turn": line.turn.number if line.turn else None,
                "open_step": line.step.number if line.step else None,
                "calls": calls,
                "integrity": {"ok": ok, "fault": fault_json(loaded.fault), "findings": findings},
            }
        )
    else:
        _print(ctx, session, line, calls)
        if loaded.fault is not None:
            ctx.out.line(f"integrity: FAILED: {loaded.fault}")
        for finding in findings:
            ctx.out.line(f"integrity: finding: session {session.id!r}, {finding['message']}")
        if ok:
            ctx.out.line(f"integrity: ok, hash chain verified over {loaded.stored_events} events")
    return EXIT_OK if ok else EXIT_FINDINGS


def _print(ctx: Context, session: Session, line: Timeline, calls: list[dict[str, Any]]) -> None:
    table = Table("turn", "step", "call", "name", "arguments", "state", "outcome", "seqs")
    for call in calls:
        seqs = " ".join(f"{k}={v}" for k, v in call["seqs"].items() if v is not None)
        style = _OUTCOME_STYLE[call["outcome"]]
        table.add_row(
            str(call["turn"]),
            str(call["step"]),
            Text(call["call_id"]),
            Text(call["name"]),
            Text(clip(call["arguments"], 60)),
            call["state"],
            f"[{style}]{call['outcome']}[/]",
            seqs,
        )
    ctx.out.console.print(table)
    if line.turn is not None:
        step = f", step {line.step.number}" if line.step is not None else ""
        ctx.out.line(f"open: turn {line.turn.number}{step} (eventlog recover {session.id})")


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session_id", metavar="ID")


AUDIT = Command(
    "audit",
    "every tool call (state, outcome class, proving seqs) and integrity verification",
    _configure,
    _run,
)
