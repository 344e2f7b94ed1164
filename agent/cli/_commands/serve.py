"""``serve``: the read-only web app on a local port (extra ``web``)."""

from __future__ import annotations

import argparse
import ipaddress
import socket

from .._context import Context, open_cli_store
from .._errors import EXIT_OK, CliError
from .._extras import optional
from .base import Command, non_negative

__all__ = ("SERVE",)


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (127.0.0.1; anything else is reachable by others: say so)",
    )
    parser.add_argument(
        "--port", type=non_negative, default=8765, metavar="N", help="port (8765; 0 picks one)"
    )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def _run(args: argparse.Namespace, ctx: Context) -> int:
    uvicorn = optional("uvicorn", "web", "serve")
    web = optional("agent.web", "web", "serve")
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((args.host, args.port))
        # Listening before the URL is printed: a client that reads it may connect at once
        # (connections wait in the backlog until the server accepts them).
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise CliError(f"cannot listen on {args.host}:{args.port}: {exc.strerror}") from None
    port = sock.getsockname()[1]
    async with open_cli_store(ctx.url, types=ctx.types) as store:
        config = uvicorn.Config(web.create_app(store), log_level="warning", lifespan="off")
        server = uvicorn.Server(config)
        where = f"[{args.host}]" if family == socket.AF_INET6 else args.host
        if not _is_loopback(args.host):
            ctx.out.warn(f"serving on {args.host}, which is not loopback: others can read it")
        ctx.out.line(f"serving http://{where}:{port}/ (read-only; Ctrl-C stops)")
        ctx.out.stdout.flush()
        await server.serve(sockets=[sock])
    return EXIT_OK


SERVE = Command(
    "serve",
    "a read-only local web app: sessions, each run's timeline, calls, integrity (extra: web)",
    _configure,
    _run,
)
