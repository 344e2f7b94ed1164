"""``audit``: every tool call with its state, fate, error code and proving seqs; failed model
attempts; integrity."""

from __future__ import annotations

import argparse
from typing import Any

from eventlog import Session
from eventlog.stores import writer_alive
from projections import Timeline, timeline
from recovery import Diagnosis, scan

from ...report import (
    FAILED_FATES,
    PENDING_FATES,
    call_row,
    counted,
    failed_attempts,
    failed_turns,
    fault_json,
    session_state,
    timestamp,
    unknown_json,
)
from .._context import Context, load_session, open_cli_store
from .._errors import EXIT_FINDINGS, EXIT_OK, states_exit
from .._tables import Column, fitted_table, styled
from .base import Command, add_salvage

__all__ = ("AUDIT",)

_OUTCOME_STYLE = {
    "completed": "green",
    "recovered": "cyan",
    "not started": "yellow",
    "error": "magenta",
    "outcome unknown": "red",
    "in progress": "cyan",
    "awaiting approval": "yellow",
    "denied": "blue",
}


def _findings(diagnosis: Diagnosis) -> list[dict[str, Any]]:
    """Integrity findings of the scan, and calls left unanswered in steps that ended."""
    found = [{"seq": f.seq, "message": f.message} for f in diagnosis.findings]
    for call in diagnosis.unanswered_in_closed_steps:
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
    async with open_cli_store(ctx.url, types=ctx.types) as store:
        loaded = await load_session(store, args.session_id, salvage=args.salvage)
        running = await writer_alive(store, loaded.session.id)
    session = loaded.session
    line = timeline(session)
    calls = [call_row(session, call, running=running) for call in line.calls()]
    attempts = failed_attempts(session)
    turns = failed_turns(session)
    findings = _findings(scan(session))
    state = session_state(session, loaded.fault, running=running, unknown=loaded.unknown)
    intact = loaded.fault is None and not findings
    failed = [c for c in calls if c["outcome"] in FAILED_FATES | PENDING_FATES]
    # Exit 1 as every command does for the state (damaged, needs repair; a running session
    # owes nothing yet), and when anything in the run went wrong: a call failed or has an
    # unknown outcome, a model attempt failed, a turn failed or was cut by a crash; and when
    # a call waits for a person's decision (nothing failed, but someone must act). A step
    # whose decisions are all made (``awaiting agent``) is no finding by itself: nobody must
    # decide or repair, its agent goes on at its next run, as a running session's would.
    ok = intact and not failed and not attempts and not turns and not states_exit([state])
    if ctx.out.json_mode:
        document: dict[str, Any] = {
            "session": session.id,
            "events": loaded.stored_events,
            "state": state,
            "open_turn": line.turn.number if line.turn else None,
            "open_step": line.step.number if line.step else None,
            "calls": calls,
            "failed_attempts": attempts,
            "failed_turns": turns,
            "integrity": {
                "ok": intact,
                "fault": fault_json(loaded.fault),
                "findings": findings,
            },
        }
        if loaded.unknown is not None:  # only then: the document's shape is otherwise as it was
            document["unknown"] = unknown_json(loaded.unknown)
        ctx.out.json(document)
    else:
        _print(ctx, session, line, calls, attempts, state)
        for turn in turns:
            ctx.out.line(f"turn {turn['turn']} ended {turn['reason']} (seq {turn['seq']})")
        if loaded.fault is not None:
            ctx.out.line(f"integrity: FAILED: {loaded.fault}")
        if loaded.unknown is not None:
            ctx.out.line(
                f"note: {loaded.unknown}: calls past it are not shown ({loaded.unknown.hint})"
            )
        for finding in findings:
            ctx.out.line(f"integrity: finding: session {session.id!r}, {finding['message']}")
        if intact:
            events = counted(loaded.stored_events, "event")
            ctx.out.line(f"integrity: ok, hash chain verified over {events}")
    return EXIT_OK if ok else EXIT_FINDINGS


#: The audit table's columns; the lowest priorities are dropped first on a narrow terminal.
_COLUMNS = (
    Column("call", priority=9, min_width=8),
    Column("name", priority=8, min_width=6),
    Column("outcome", priority=10, min_width=17),  # "error INVALID_ARGUMENTS" wraps whole
    Column("seqs", priority=7, min_width=11),
    Column("turn", priority=5, justify="right"),
    Column("step", priority=4, justify="right"),
    Column("state", priority=3),
    Column("arguments", priority=1, min_width=12),
)


def _print(
    ctx: Context,
    session: Session,
    line: Timeline,
    calls: list[dict[str, Any]],
    attempts: list[dict[str, Any]],
    state: str,
) -> None:
    console = ctx.out.console  # first: without rich, say so before anything is printed
    rows = []
    for call in calls:
        seqs = " ".join(f"{k}={v}" for k, v in call["seqs"].items() if v is not None)
        outcome = call["outcome"]
        if call["error"] is not None and outcome == "error":
            outcome = f"error {call['error']['code']}"
        rows.append(
            {
                "turn": str(call["turn"]),
                "step": str(call["step"]),
                "call": call["call_id"],
                "name": call["name"],
                "arguments": call["arguments"],
                "state": call["state"],
                "outcome": styled(outcome, _OUTCOME_STYLE[call["outcome"]]),
                "seqs": seqs,
            }
        )
    if rows:
        console.print(fitted_table(_COLUMNS, rows, console.width))
    else:  # a table of headers alone reads like output that failed to arrive
        ctx.out.line("tool calls: none")
    for attempt in attempts:
        ctx.out.line(
            f"failed model attempt: turn {attempt['turn']} step {attempt['step']} "
            f"(seq {attempt['seq']}): {attempt['error']}"
        )
    for call in calls:
        _print_approval(ctx, call)
    if state == "running":
        ctx.out.line(f"running: a live writer holds session {session.id!r}")
    elif state == "awaiting approval":
        ctx.out.line(
            f"awaiting approval: turn {line.turn.number if line.turn else '?'} waits for a "
            f"decision (eventlog approvals --pending; eventlog approve {session.id} CALL --by "
            "NAME)"
        )
    elif state == "awaiting agent":
        step = f", step {line.step.number}" if line.step is not None else ""
        ctx.out.line(
            f"awaiting agent: turn {line.turn.number if line.turn else '?'}{step} has every "
            "decision it asked for; its agent goes on with it at its next run (Agent.resume, "
            "then run_until_idle(); an OpenAI Agents run: pending_run), nothing to repair"
        )
    elif line.turn is not None:
        step = f", step {line.step.number}" if line.step is not None else ""
        ctx.out.line(
            f"needs repair: turn {line.turn.number}{step} is open and nobody is writing "
            f"(eventlog recover {session.id})"
        )


def _print_approval(ctx: Context, call: dict[str, Any]) -> None:
    """One line per call that needed a decision: the decision, who, when and the seqs."""
    approval = call["approval"]
    if approval is None:
        return
    where = f"approval: {call['name']} [{call['call_id']}]"
    asked = f"asked at {timestamp(approval['requested_at'])} (seq {approval['requested']})"
    if approval["decision"] is None:
        ctx.out.line(f"{where}: awaiting a decision, {asked}: {approval['reason']}")
        return
    word = "approved" if approval["decision"] == "approve" else "denied"
    why = f": {approval['decision_reason']}" if approval["decision_reason"] else ""
    ctx.out.line(
        f"{where}: {word} by {approval['by']} at {timestamp(approval['decided_at'])} "
        f"(seq {approval['decided']}){why}; {asked}"
    )


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session_id", metavar="ID")
    add_salvage(parser)


AUDIT = Command(
    "audit",
    "every tool call (state, fate with its error code, proving seqs), failed model attempts, "
    "failed or interrupted turns, approvals and integrity (exit 1: something failed, has an "
    "unknown outcome, waits for a decision or needs repair)",
    _configure,
    _run,
)
