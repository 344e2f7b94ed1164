"""``replay``: the history exactly as the model saw it after a given event."""

from __future__ import annotations

import argparse
from typing import Any

import msgspec

from eventlog import RequestHeader, Session
from projections import anthropic_request, messages, openai_request, request_header

from ...report import counted, fault_json, message_text
from .._context import Context, load_session, open_cli_store
from .._errors import EXIT_FINDINGS, EXIT_OK, CliError
from .base import Command, add_salvage, non_negative

__all__ = ("REPLAY",)

_FORMATS = ("text", "openai", "anthropic", "json")
_ROLE_STYLE = {"user": "cyan", "assistant": "green", "tool": "magenta"}


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session_id", metavar="ID")
    parser.add_argument(
        "--at",
        type=non_negative,
        metavar="SEQ",
        help="as it stood after event SEQ, one of the log's seqs 0..head (default: now); a "
        "negative SEQ is refused",
    )
    parser.add_argument(
        "--format",
        choices=_FORMATS,
        default=None,
        help="text (default), openai / anthropic (the provider's message shapes), json",
    )
    add_salvage(parser)


async def _run(args: argparse.Namespace, ctx: Context) -> int:
    fmt = args.format or ("json" if ctx.out.json_mode else "text")
    async with open_cli_store(ctx.url, types=ctx.types) as store:
        loaded = await load_session(store, args.session_id, salvage=args.salvage)
        session = loaded.session
        if args.at is not None and args.at > session.head:
            readable = "" if loaded.fault is None else " (read before the damage)"
            raise CliError(
                f"--at {args.at}: session {session.id!r} has events 0..{session.head}"
                f"{readable}; SEQ is one of them"
            )
        history = messages(session, at=args.at)
        # A provider body carries the bytes of the images and files the messages reference.
        attachments = (
            await store.load_attachments(history) if fmt in ("openai", "anthropic") else {}
        )
    header = request_header(session, at=args.at)
    if fmt == "text":
        _print_text(ctx, session, args.at, header, history)
    else:
        document = _document(fmt, session, args.at, header, history, loaded.fault, attachments)
        ctx.out.json(document)
    if loaded.fault is not None:
        ctx.out.warn(f"{loaded.fault}; the replay stops before it")
        return EXIT_FINDINGS
    return EXIT_OK


def _document(
    fmt: str,
    session: Session,
    at: int | None,
    header: RequestHeader,
    history: Any,
    fault: Any,
    attachments: dict[str, bytes],
) -> dict[str, Any]:
    seq = session.head if at is None else at
    base: dict[str, Any] = {"session": session.id, "at": seq, "model": header.model}
    history = list(history)
    if fmt in ("openai", "anthropic"):
        build = openai_request if fmt == "openai" else anthropic_request
        body = build(
            history,
            system=header.system or "",
            tools=header.tools or (),
            model=header.model or "",
            params=header.params,
            attachments=attachments,
        )
        # The model named once, as the header has it (None when never set).
        base.update({k: v for k, v in body.items() if k != "model"})
    else:
        base["system"] = header.system
        base["tools"] = [msgspec.to_builtins(t) for t in header.tools or ()]
        base["params"] = header.params
        base["messages"] = [msgspec.to_builtins(m) for m in history]
        base["fault"] = fault_json(fault)
    return base


def _print_text(
    ctx: Context, session: Session, at: int | None, header: RequestHeader, history: Any
) -> None:
    console = ctx.out.console
    from rich.panel import Panel
    from rich.text import Text

    seq = session.head if at is None else at
    console.print(
        f"session {session.id} after seq {seq}: {counted(len(history), 'message')}"
        + (f", model {header.model}" if header.model else "")
    )
    if header.system:
        console.print(Panel(header.system, title="system", title_align="left", expand=False))
    for number, message in enumerate(history, 1):
        style = _ROLE_STYLE.get(message.role, "white")
        kind = f" ({message.source.kind})" if message.source is not None else ""
        title = Text(f"{number}. {message.role}{kind}", style=style)
        console.print(Panel(message_text(message), title=title, title_align="left", expand=False))


REPLAY = Command(
    "replay",
    "the messages exactly as the model saw them after event SEQ (default: now)",
    _configure,
    _run,
)
