"""``approvals`` (every call that asked for a person's decision, across sessions), ``approve``
and ``deny`` (record one, docs/approvals.md).

``approve`` and ``deny`` are write commands, like ``recover --apply``, ``import`` and ``fork``:
they take the session's writer lease, record the ``tool/approval`` and flush it. A live agent
holding the session makes them fail (exit 2) with a message saying to decide through that
agent: two writers never race on one log. A refused decision (unknown call, a call needing
none, a step no longer open, the other decision already made) commits nothing and exits 2.
"""

from __future__ import annotations

import argparse
from typing import Any

import msgspec

from eventlog import ApprovalDecision, Session, SessionBusyError, SessionNotFoundError
from eventlog.stores import LogStore
from projections import timeline
from recovery import (
    ApprovalError,
    PendingApproval,
    decide,
    pending_approvals,
    recorded_event,
)

from ...report import timestamp
from .._context import Context, open_cli_store
from .._errors import EXIT_OK, CliError
from .._tables import Column, fitted_table
from .base import Command

__all__ = ("APPROVALS", "APPROVE", "DENY")

#: Sessions listed per page while walking the store.
_PAGE = 1000

_COLUMNS = (
    Column("session", priority=10, min_width=8),
    Column("call", priority=9, min_width=8),
    Column("name", priority=8, min_width=6),
    Column("state", priority=10, min_width=9),
    Column("by", priority=6),
    Column("seqs", priority=7, min_width=11),
    Column("turn", priority=4, justify="right"),
    Column("step", priority=3, justify="right"),
    Column("reason", priority=2, min_width=12),
    Column("asked", priority=1, min_width=24),
)


def _configure_list(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--pending", action="store_true", help="only the calls still waiting for a decision"
    )


async def _rows_of(session: Session, pending_only: bool) -> list[dict[str, Any]]:
    """One row per call of ``session`` that asked for a decision (only waiting ones with
    ``pending_only``); older events are read from the store when not in memory."""
    if pending_only:
        return [_pending_row(p) for p in await pending_approvals(session)]
    rows = []
    for call in timeline(session).calls():
        if call.requested is None:
            continue
        asked = await recorded_event(session, call.requested)
        row = _pending_row(_asked(session.id, asked))
        if call.decided is not None:
            decided = await recorded_event(session, call.decided)
            word = "approved" if decided.data.decision == "approve" else "denied"
            row.update(
                state=word,
                by=decided.data.by,
                decision_reason=decided.data.reason,
                decided=decided.seq,
                decided_at=decided.time,
            )
        rows.append(row)
    return rows


def _asked(session_id: str, asked: Any) -> PendingApproval:
    """The :class:`~recovery.PendingApproval` shape of a ``tool/approval-request`` event."""
    data = asked.data
    return PendingApproval(
        session_id=session_id,
        turn=data.turn,
        step=data.step,
        call_id=data.call_id,
        name=data.name,
        arguments=data.arguments,
        reason=data.reason,
        seq=asked.seq,
        requested_at=asked.time,
    )


def _pending_row(pending: PendingApproval) -> dict[str, Any]:
    row: dict[str, Any] = msgspec.structs.asdict(pending)
    row["session"] = row.pop("session_id")
    row["requested"] = row.pop("seq")
    row.update(state="awaiting approval", by=None, decision_reason=None)
    row.update(decided=None, decided_at=None)
    return row


async def _walk(store: LogStore, pending_only: bool) -> tuple[list[dict[str, Any]], list[str]]:
    """Every session's rows, and a warning for each session that could not be read."""
    rows: list[dict[str, Any]] = []
    warnings: list[str] = []
    after: str | None = None
    while True:
        infos = await store.list(after=after, limit=_PAGE)
        for info in infos:
            try:
                # Read-only, no lease: a live agent's session is read beside it.
                session = await store.open(info.id, salvage=True)
            except SessionNotFoundError:
                continue  # deleted since it was listed
            try:
                rows.extend(await _rows_of(session, pending_only))
                if session.salvage_fault is not None:
                    warnings.append(f"session {info.id!r}: read up to {session.salvage_fault}")
            finally:
                await session.aclose()
        if len(infos) < _PAGE:
            return rows, warnings
        after = infos[-1].id


async def _run_list(args: argparse.Namespace, ctx: Context) -> int:
    async with open_cli_store(ctx.url, types=ctx.types) as store:
        rows, warnings = await _walk(store, args.pending)
    if ctx.out.json_mode:
        ctx.out.json({"approvals": rows, "warnings": warnings})
        return EXIT_OK
    for warning in warnings:
        ctx.out.warn(warning)
    if not rows:
        ctx.out.line("approvals: none waiting" if args.pending else "approvals: none")
        return EXIT_OK
    console = ctx.out.console
    cells = [
        {
            "session": row["session"],
            "call": row["call_id"],
            "name": row["name"],
            "state": row["state"],
            "by": row["by"] or "",
            "seqs": " ".join(
                f"{key}={row[key]}" for key in ("requested", "decided") if row[key] is not None
            ),
            "turn": str(row["turn"]),
            "step": str(row["step"]),
            "reason": row["decision_reason"] or row["reason"],
            "asked": timestamp(row["requested_at"]),
        }
        for row in rows
    ]
    console.print(fitted_table(_COLUMNS, cells, console.width))
    return EXIT_OK


def _configure_decision(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session_id", metavar="SESSION")
    parser.add_argument("call_id", metavar="CALL")
    parser.add_argument("--by", required=True, metavar="NAME", help="who decides (recorded)")
    parser.add_argument("--reason", metavar="TEXT", help="why (recorded; the model sees it)")


async def _record(args: argparse.Namespace, ctx: Context, decision: ApprovalDecision) -> int:
    async with open_cli_store(ctx.url, types=ctx.types) as store:
        try:
            session = await store.open(args.session_id)
        except SessionBusyError as exc:
            raise CliError(
                f"session {args.session_id!r} is held by a live agent (it holds the writer "
                f"lease): {decision} through that agent (Agent.{decision}), or stop it first"
            ) from exc
        try:
            record = await decide(session, args.call_id, decision, by=args.by, reason=args.reason)
        except ApprovalError as exc:
            raise CliError(str(exc)) from exc
        finally:
            await session.aclose()
    if ctx.out.json_mode:
        ctx.out.json(msgspec.structs.asdict(record))
        return EXIT_OK
    word = "approved" if record.decision == "approve" else "denied"
    ctx.out.line(
        f"{word}: call {record.call_id} of session {record.session_id} (turn {record.turn}, "
        f"step {record.step}) by {record.by} at {timestamp(record.at)}, seq {record.seq} "
        f"(asked at seq {record.requested}); the agent goes on at its next run"
    )
    return EXIT_OK


async def _run_approve(args: argparse.Namespace, ctx: Context) -> int:
    return await _record(args, ctx, "approve")


async def _run_deny(args: argparse.Namespace, ctx: Context) -> int:
    return await _record(args, ctx, "deny")


APPROVALS = Command(
    "approvals",
    "every tool call that asked for a person's decision, across sessions (--pending: only "
    "those still waiting)",
    _configure_list,
    _run_list,
)
APPROVE = Command(
    "approve",
    "approve a waiting tool call (takes the session's writer lease; exit 2 when refused)",
    _configure_decision,
    _run_approve,
)
DENY = Command(
    "deny",
    "deny a waiting tool call: it never runs (takes the writer lease; exit 2 when refused)",
    _configure_decision,
    _run_deny,
)
