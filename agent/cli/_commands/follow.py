"""``follow`` (live tail until interrupted) and ``fork`` (a new session from a prefix)."""

from __future__ import annotations

import argparse

import msgspec

from eventlog import Event

from ...report import event_json, event_summary, timestamp
from .._context import Context, open_cli_store
from .._errors import EXIT_OK
from .._safe import terminal_safe
from .base import Command, non_negative, positive

__all__ = ("FOLLOW", "FORK")


def _configure_follow(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session_id", metavar="ID")
    parser.add_argument(
        "--after",
        type=non_negative,
        metavar="SEQ",
        help="start after event SEQ (default: from the beginning)",
    )
    parser.add_argument(
        "--count", type=positive, metavar="N", help="stop after N events (default: never)"
    )


async def _run_follow(args: argparse.Namespace, ctx: Context) -> int:
    if not ctx.out.json_mode:
        ctx.out.console  # noqa: B018 (without rich, say so before waiting for events)
    async with open_cli_store(ctx.url, types=ctx.types) as store:
        seen = 0
        after = -1 if args.after is None else args.after
        events = store.follow(args.session_id, after=after)
        try:
            async for event in events:
                _print_event(ctx, event)
                seen += 1
                if args.count is not None and seen >= args.count:
                    break
        finally:
            close = getattr(events, "aclose", None)  # an async generator: close it now
            if close is not None:
                await close()
    return EXIT_OK


def _print_event(ctx: Context, event: Event) -> None:
    if ctx.out.json_mode:  # one JSON object per line, for `| jq` and friends
        ctx.out.stdout.write(msgspec.json.encode(event_json(event)).decode() + "\n")
    else:
        from rich.text import Text

        row = Text.assemble(
            (f"{event.seq:>6} {timestamp(event.time)}", "dim"),
            " ",
            (event.type, "bold"),
            " ",
            terminal_safe(event_summary(event)),  # before rich's Text drops BEL, CR...
        )
        ctx.out.console.print(row, soft_wrap=True)
    ctx.out.stdout.flush()


def _configure_fork(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session_id", metavar="ID")
    parser.add_argument(
        "--at",
        type=non_negative,
        required=True,
        metavar="SEQ",
        help="the last parent event the child keeps (outside any open turn)",
    )
    parser.add_argument("--id", dest="child_id", metavar="ID", help="the new session's id")


async def _run_fork(args: argparse.Namespace, ctx: Context) -> int:
    async with open_cli_store(ctx.url, types=ctx.types) as store:
        child = await store.fork(args.session_id, args.at, child_id=args.child_id)
        head = child.head
        await child.aclose()
    if ctx.out.json_mode:
        ctx.out.json({"id": child.id, "parent": args.session_id, "boundary": args.at, "head": head})
    else:
        ctx.out.line(f"forked {args.session_id} after seq {args.at}: new session {child.id}")
    return EXIT_OK


FOLLOW = Command(
    "follow",
    "print a session's events, then new ones live, until interrupted",
    _configure_follow,
    _run_follow,
)
FORK = Command(
    "fork", "create a new session from a session's events 0..SEQ", _configure_fork, _run_fork
)
