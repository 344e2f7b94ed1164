"""``verify``: check the hash chain (and that every event decodes) of one or all sessions, the
attachments their events reference, and each session's stored snapshot against its log."""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from typing import Any

from eventlog import EventLogError, SessionInfo, SessionNotFoundError
from eventlog.stores import LogStore

from ...report import counted, fault_json, unknown_json
from .._context import Context, load_session, open_cli_store, stored_record
from .._errors import EXIT_FINDINGS, EXIT_OK, CliError
from .base import Command

__all__ = ("VERIFY",)

_PAGE = 200


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session_id", metavar="ID", nargs="?", help="the session to verify")
    parser.add_argument("--all", action="store_true", help="verify every session in the store")


async def _run(args: argparse.Namespace, ctx: Context) -> int:
    if (args.session_id is None) == (not args.all):
        raise CliError("verify needs a session ID or --all (not both)")
    results: list[dict[str, Any]] = []
    async with open_cli_store(ctx.url, types=ctx.types) as store:
        infos = [info async for info in _targets(store, args.session_id)]
        total = sum(max(0, info.head + 1) for info in infos)
        with ctx.out.progress(total, "verifying") as bar:
            for info in infos:
                result = await _verify_one(store, info)
                results.append(result)
                if not ctx.out.json_mode:
                    _print(ctx, result)
                bar.advance(max(0, info.head + 1))
    ok = all(r["ok"] for r in results)
    if ctx.out.json_mode:
        ctx.out.json({"ok": ok, "sessions": results})
    elif args.all:
        bad = sum(not r["ok"] for r in results)
        ctx.out.line(f"{counted(len(results), 'session')} verified, {bad} with findings")
    return EXIT_OK if ok else EXIT_FINDINGS


async def _targets(store: LogStore, session_id: str | None) -> AsyncIterator[SessionInfo]:
    if session_id is not None:
        record = await stored_record(store, session_id)
        yield SessionInfo(id=record.id, created_at=record.created_at, head=record.head)
        return
    after: str | None = None
    while True:
        page = await store.list(after=after, limit=_PAGE)
        for info in page:
            yield info
        if len(page) < _PAGE:
            return
        after = page[-1].id


async def _verify_one(store: LogStore, info: SessionInfo) -> dict[str, Any]:
    try:
        return await _checked(store, info)
    except SessionNotFoundError:  # deleted while --all ran: gone, not damaged
        return {"id": info.id, "events": 0, "ok": True, "fault": None, "deleted": True}


async def _checked(store: LogStore, info: SessionInfo) -> dict[str, Any]:
    result: dict[str, Any] = {"id": info.id, "events": info.head + 1, "ok": False, "fault": None}
    result["snapshot"] = None  # the seq of the snapshot checked, when one is stored
    if info.error is not None:
        result["fault"] = {"error": "SessionInfo", "seq": None, "message": info.error}
        return result
    try:
        loaded = await load_session(store, info.id)
    except SessionNotFoundError:
        raise
    except EventLogError as exc:  # a record that cannot be read: report it, go on
        result["fault"] = fault_json(exc)
        return result
    result["events"] = loaded.stored_events
    if loaded.unknown is not None:
        result["unknown"] = unknown_json(loaded.unknown)
    fault = loaded.fault
    if fault is None:
        try:  # the attachments the events reference: present, and still their digests' bytes
            await store.verify_attachments(info.id)
            if loaded.unknown is None:  # the snapshot, rebuilt from the log and compared
                result["snapshot"] = await store.verify_snapshot(info.id)
        except SessionNotFoundError:
            raise
        except EventLogError as exc:
            fault = exc
    result["ok"] = fault is None
    result["fault"] = fault_json(fault)
    return result


def _print(ctx: Context, result: dict[str, Any]) -> None:
    if result.get("deleted"):
        ctx.out.line(f"gone  {result['id']}  deleted while being verified")
    elif result["ok"]:
        events = counted(result["events"], "event")
        ctx.out.line(f"ok    {result['id']}  {events}, hash chain intact")
        if result.get("unknown"):
            ctx.out.line(f"      {result['id']}  {result['unknown']['message']}")
    else:
        ctx.out.line(f"FAIL  {result['id']}  {result['fault']['message']}")


VERIFY = Command(
    "verify",
    "verify the hash chain of a session (or --all); exit 1 naming session and seq on a finding",
    _configure,
    _run,
)
