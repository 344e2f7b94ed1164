"""``recover``: the crash diagnosis of a session; ``--apply`` appends the closers."""

from __future__ import annotations

import argparse
from typing import Any

from eventlog import Session
from eventlog.stores import writer_alive
from recovery import Diagnosis, repair, scan

from ...report import (
    counted,
    event_summary,
    fault_json,
    session_state,
    timestamp,
    unknown_json,
)
from .._context import Context, load_session, open_cli_store
from .._errors import EXIT_OK, states_exit
from .base import Command, add_salvage

__all__ = ("RECOVER",)

#: What ``recover`` prints for each dangling state (``DanglingKind``, the timeline's names): the
#: answer repair gives it, in the words this command has always printed.
_ANSWER_WORD = {
    "completed": "recovered",
    "started": "outcome-unknown",
    "proposed": "not-started",
    "approved": "not-started",
    "denied": "denied",
    "awaiting approval": "awaiting-approval",
}


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session_id", metavar="ID")
    parser.add_argument(
        "--apply",
        action="store_true",
        help="append the closers (takes the session's writer lease)",
    )
    add_salvage(parser)


async def _run(args: argparse.Namespace, ctx: Context) -> int:
    async with open_cli_store(ctx.url, types=ctx.types) as store:
        if not args.apply:
            loaded = await load_session(store, args.session_id, salvage=args.salvage)
            running = await writer_alive(store, loaded.session.id)
            diagnosis = scan(loaded.session)
            doc = _diagnosis_json(diagnosis)
            doc["fault"] = fault_json(loaded.fault)
            doc["running"] = running
            if loaded.unknown is not None:  # only then: the document's shape is otherwise as it was
                doc["unknown"] = unknown_json(loaded.unknown)
            _report(ctx, doc, loaded.session, ())
            # The state every command judges by: a live writer's open step is work in
            # progress, not a crash; a damaged log or an open turn nobody writes is a finding.
            state = session_state(
                loaded.session, loaded.fault, running=running, unknown=loaded.unknown
            )
            return states_exit([state])
        # The full chain check, not the default open's (from the latest snapshot on): repair
        # itself needs nothing older (the snapshot's timeline keeps the open step and every
        # unanswered call, and repair reads a recorded outcome from the store), but this
        # command never appends to a log that fails verification anywhere (a damaged log is
        # a finding, exit 1, and stays as it is), and it runs once per incident.
        session = await store.open(args.session_id, verify="full")
        try:
            report = await repair(session)
        finally:
            await session.aclose()
        doc = _diagnosis_json(report.diagnosis)
        doc["fault"] = None
        doc["running"] = False
        doc["repaired_at"] = report.ran_at
        _report(ctx, doc, session, report.appended)
    return EXIT_OK


def _diagnosis_json(diagnosis: Diagnosis) -> dict[str, Any]:
    return {
        "session": diagnosis.session_id,
        "head": diagnosis.head,
        "open_turn": diagnosis.open_turn.number if diagnosis.open_turn else None,
        "open_step": diagnosis.open_step.number if diagnosis.open_step else None,
        "needs_repair": diagnosis.needs_repair,
        "dangling": [
            {
                "turn": d.call.turn,
                "step": d.call.step,
                "call_id": d.call.call_id,
                "name": d.call.name,
                "kind": _ANSWER_WORD[d.kind],
                "proof": list(d.proof),
            }
            for d in diagnosis.dangling
        ],
        # The key keeps its name (the --json output is an interface); it lists only the calls
        # unanswered in closed steps, as the text output says.
        "unanswered": [
            {"turn": c.turn, "step": c.step, "call_id": c.call_id, "name": c.name}
            for c in diagnosis.unanswered_in_closed_steps
        ],
        "findings": [{"seq": f.seq, "message": f.message} for f in diagnosis.findings],
        "awaiting_approval": [
            {"turn": c.turn, "step": c.step, "call_id": c.call_id, "name": c.name}
            for c in diagnosis.awaiting_approval
        ],
        "awaiting_agent": diagnosis.awaiting_agent,
    }


def _report(ctx: Context, doc: dict[str, Any], session: Session, appended: tuple[int, ...]) -> None:
    events = session.window()  # the appended events: the latest
    doc["applied"] = bool(appended)
    doc["appended"] = [
        {"seq": seq, "type": events.event(seq).type, "summary": event_summary(events.event(seq))}
        for seq in appended
    ]
    if ctx.out.json_mode:
        ctx.out.json(doc)
        return
    line = ctx.out.line
    sid = doc["session"]
    where = f"turn {doc['open_turn']}" if doc["open_turn"] is not None else "no open turn"
    if doc["open_step"] is not None:
        where += f", step {doc['open_step']}"
    line(f"session {sid}: {counted(doc['head'] + 1, 'event')}, {where}")
    for d in doc["dangling"]:
        proof = ",".join(map(str, d["proof"]))
        line(
            f"  dangling {d['name']} [{d['call_id']}] turn {d['turn']} step {d['step']}: "
            f"{d['kind']} (seqs {proof})"
        )
    for c in doc["unanswered"]:
        line(
            f"  unanswered in a closed step (reported, not repaired): {c['name']} "
            f"[{c['call_id']}] turn {c['turn']} step {c['step']}"
        )
    for f in doc["findings"]:
        line(f"  finding: {f['message']}")
    if doc["fault"] is not None:
        line(f"  corrupt: {doc['fault']['message']}")
    for a in doc["appended"]:
        line(f"  appended seq {a['seq']} {a['type']}: {a['summary']}")
    if appended:
        when = timestamp(doc.get("repaired_at"))
        line(f"repaired: {counted(len(appended), 'closer')} appended and flushed at {when}")
    elif doc["running"]:
        line("running: a live writer holds the session; what is open is in progress")
    elif doc.get("unknown"):
        # What looks open may close past the event this reader cannot decode: no verdict.
        line(f"no diagnosis past seq {doc['unknown']['seq']}: {doc['unknown']['message']}")
    elif doc["needs_repair"]:
        line(f"needs repair: run `eventlog recover {sid} --apply`")
    elif doc["awaiting_approval"]:
        waiting = counted(len(doc["awaiting_approval"]), "call")
        line(
            f"awaiting approval: {waiting} waiting for a decision, nothing to repair "
            f"(eventlog approve {sid} CALL --by NAME, or deny)"
        )
    elif doc["awaiting_agent"]:
        line(
            "awaiting agent: every decision the step asked for is made, nothing to repair; "
            "its agent goes on with it at its next run (Agent.resume, then run_until_idle(); "
            "an OpenAI Agents run: pending_run)"
        )
    else:
        line("nothing to repair")


RECOVER = Command(
    "recover",
    "the crash diagnosis of a session; --apply appends the closers (exit 1: repair needed)",
    _configure,
    _run,
)
