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
    parser.add_argument(
        "--allow-host",
        action="append",
        dest="allow_hosts",
        default=[],
        metavar="NAME",
        help="also answer requests whose Host is NAME (repeatable); loopback names and the "
        "--host address are always answered, any other Host gets 400 (DNS rebinding)",
    )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
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
        # The address bound is a name the app answers under (not 0.0.0.0: no browser sends
        # that), with the names the user allowed.
        hosts = [*([] if _is_wildcard(args.host) else [args.host]), *args.allow_hosts]
        app = web.create_app(store, allowed_hosts=hosts)
        config = uvicorn.Config(app, log_level="warning", lifespan="off")
        server = uvicorn.Server(config)
        where = f"[{args.host}]" if family == socket.AF_INET6 else args.host
        if not _is_loopback(args.host):
            ctx.out.warn(f"serving on {args.host}, which is not loopback: others can read it")
        if _is_wildcard(args.host) and not args.allow_hosts:
            ctx.out.warn(
                "other machines reach it only by a name given with --allow-host "
                "(requests with any other Host header are refused)"
            )
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
