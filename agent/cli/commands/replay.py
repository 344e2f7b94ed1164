"""``replay``: the history exactly as the model saw it after a given event."""

from __future__ import annotations

import argparse
from typing import Any

import msgspec
from rich.markup import escape
from rich.panel import Panel

from eventlog import RequestHeader, Session
from projections import messages, to_anthropic, to_openai

from ...report import header_at
from ..context import Context, load_session, open_cli_store
from ..errors import EXIT_FINDINGS, EXIT_OK
from ..render import fault_json, message_text
from .base import Command, add_salvage, non_negative

__all__ = ("REPLAY",)

_FORMATS = ("text", "openai", "anthropic", "json")
_ROLE_STYLE = {"user": "cyan", "assistant": "green", "tool": "magenta"}


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session_id", metavar="ID")
    parser.add_argument(
        "--at", type=non_negative, metavar="SEQ", help="as it stood after event SEQ (default: now)"
    )
    parser.add_argument(
        "--format",
        choices=_FORMATS,
        default=None,
        help="text (default), openai / anthropic (the provider's message shapes), json",
    )
    add_salvage(parser)


async def _run(args: argparse.Namespace, ctx: Context) -> int:
    async with open_cli_store(ctx.url) as store:
        loaded = await load_session(store, args.session_id, salvage=args.salvage)
    session = loaded.session
    history = messages(session, at=args.at)
    header = header_at(session.events(), args.at)
    fmt = args.format or ("json" if ctx.out.json_mode else "text")
    if fmt == "text":
        _print_text(ctx, session, args.at, header, history)
    else:
        ctx.out.json(_document(fmt, session, args.at, header, history, loaded.fault))
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
) -> dict[str, Any]:
    seq = session.head if at is None else at
    base: dict[str, Any] = {"session": session.id, "at": seq, "model": header.model}
    tools = [msgspec.to_builtins(t) for t in header.tools or ()]
    if fmt == "openai":
        system = [{"role": "system", "content": header.system}] if header.system else []
        base["messages"] = system + list(to_openai(list(history)))
        base["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t["name"],
                    "description": t.get("description", ""),
                    "parameters": t.get("parameters", {}),
                },
            }
            for t in tools
        ]
    elif fmt == "anthropic":
        base["system"] = header.system
        base["messages"] = list(to_anthropic(list(history)))
        base["tools"] = [
            {
                "name": t["name"],
                "description": t.get("description", ""),
                "input_schema": t.get("parameters", {}),
            }
            for t in tools
        ]
    else:
        base["system"] = header.system
        base["tools"] = tools
        base["params"] = header.params
        base["messages"] = [msgspec.to_builtins(m) for m in history]
        base["fault"] = fault_json(fault)
    return base


def _print_text(
    ctx: Context, session: Session, at: int | None, header: RequestHeader, history: Any
) -> None:
    seq = session.head if at is None else at
    console = ctx.out.console
    console.print(
        f"session {escape(session.id)} after seq {seq}: {len(history)} messages"
        + (f", model {escape(header.model)}" if header.model else ""),
        highlight=False,
    )
    if header.system:
        console.print(
            Panel(escape(header.system), title="system", title_align="left", expand=False)
        )
    for number, message in enumerate(history, 1):
        style = _ROLE_STYLE.get(message.role, "white")
        kind = f" ({message.source.kind})" if message.source is not None else ""
        console.print(
            Panel(
                escape(message_text(message)),
                title=f"[{style}]{number}. {message.role}{escape(kind)}[/]",
                title_align="left",
                expand=False,
            )
        )


REPLAY = Command(
    "replay",
    "the messages exactly as the model saw them after event SEQ (default: now)",
    _configure,
    _run,
)
