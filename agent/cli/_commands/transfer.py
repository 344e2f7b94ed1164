"""``export``: one session as JSONL (every stored column), as one HTML page, or as an
OpenTelemetry trace."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Protocol

import anyio

from eventlog import (
    EventLogError,
)
from eventlog.stores import (
    GENESIS_HASH,
    row_digests,
    verify_rows,
)

from ...report import counted
from .._context import Context, load_session, open_cli_store, stored_record
from .._errors import EXIT_FINDINGS, EXIT_OK, CliError
from .._extras import optional
from .._jsonl import (
    attachment_line,
    event_line,
    session_line,
)
from .base import Command

__all__ = ("EXPORT",)


def _configure_export(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session_id", metavar="ID")
    parser.add_argument(
        "-o", "--output", metavar="FILE", help="write to FILE instead of standard output"
    )
    parser.add_argument(
        "--format",
        choices=("jsonl", "html", "otlp"),
        default="jsonl",
        help="jsonl (lossless, default), html (the session page as one file; extra: web), "
        "otlp (a trace sent to --endpoint; extra: otel)",
    )
    parser.add_argument(
        "--endpoint",
        metavar="URL",
        default="http://127.0.0.1:4318/v1/traces",
        help="with --format otlp: the OTLP/HTTP receiver (http://127.0.0.1:4318/v1/traces)",
    )
    parser.add_argument(
        "--content",
        action="store_true",
        help="with --format otlp: include message content (off: it may be private)",
    )


async def _run_export(args: argparse.Namespace, ctx: Context) -> int:
    if args.format in ("jsonl", "html") and args.output in (None, "-") and ctx.out.stdout.isatty():
        # The file is written byte for byte as stored (its hash chain covers those bytes), so it
        # cannot be escaped for a screen, and stored text may hold terminal control sequences.
        raise CliError(
            f"export writes the {args.format} file as stored, which is not for a terminal: "
            "use -o FILE, or pipe it"
        )
    if args.format == "html":
        return await _export_html(args, ctx)
    if args.format == "otlp":
        return await _export_otlp(args, ctx)
    async with open_cli_store(ctx.url, types=ctx.types) as store:
        record = await stored_record(store, args.session_id)
        with _target(args.output, ctx) as out:
            out.write(session_line(record) + b"\n")
            prev, fault = GENESIS_HASH, None
            digests: dict[str, None] = {}
            # Up to the head read above: a live writer's later events belong to a later export.
            async for chunk in store.read_rows(record.id, 0, record.head + 1):
                rows = list(chunk)
                out.write(b"".join(event_line(row) + b"\n" for row in rows))
                if fault is None:
                    try:
                        verify_rows(rows, prev, rows[0].seq, session_id=record.id)
                        for row in rows:
                            digests.update(
                                dict.fromkeys(row_digests(row, store.types, session_id=record.id))
                            )
                    except EventLogError as exc:
                        fault = exc
                prev = rows[-1].hash if rows else prev
            # The attachments the events reference travel with them (checked as they are read).
            for digest in digests:
                try:
                    out.write(attachment_line(digest, await store.get_attachment(digest)) + b"\n")
                except EventLogError as exc:
                    fault = fault or exc
    if fault is not None:
        ctx.out.warn(f"{fault}; exported as stored, but `import` will refuse it")
        return EXIT_FINDINGS
    return EXIT_OK


async def _export_html(args: argparse.Namespace, ctx: Context) -> int:
    web = optional("agent.web", "web", "--format html")
    async with open_cli_store(ctx.url, types=ctx.types) as store:
        exported = await web.export_html(store, args.session_id)
    with _target(args.output, ctx) as out:
        out.write(exported.html.encode())
    if exported.fault is not None:
        ctx.out.warn(f"{exported.fault}; the page shows the events before it")
        return EXIT_FINDINGS
    return EXIT_OK


async def _export_otlp(args: argparse.Namespace, ctx: Context) -> int:
    otel = optional("agent.otel", "otel", "--format otlp")
    async with open_cli_store(ctx.url, types=ctx.types) as store:
        loaded = await load_session(store, args.session_id)
    sent = await anyio.to_thread.run_sync(
        lambda: otel.export_otlp(loaded.session, args.endpoint, include_content=args.content)
    )
    if ctx.out.json_mode:
        ctx.out.json({"session": loaded.session.id, "spans": sent, "endpoint": args.endpoint})
    else:
        ctx.out.line(
            f"sent session {loaded.session.id}: {counted(sent, 'span')} to {args.endpoint}"
        )
    if loaded.fault is not None:
        ctx.out.warn(f"{loaded.fault}; the trace stops before it")
        return EXIT_FINDINGS
    return EXIT_OK


@contextmanager
def _target(path: str | None, ctx: Context) -> Iterator[_Writable]:
    if path is None or path == "-":
        ctx.out.stdout.flush()
        stream = getattr(ctx.out.stdout, "buffer", None)
        if stream is None:  # a text-only stream (tests capturing stdout): encode ourselves
            yield _TextBytes(ctx.out.stdout)
        else:
            yield stream
            stream.flush()
        return
    with open(path, "wb") as file:
        yield file


class _Writable(Protocol):
    def write(self, data: bytes, /) -> int: ...


class _TextBytes:
    """A bytes writer over a text stream (export lines are UTF-8 JSON)."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def write(self, data: bytes) -> int:
        return self._stream.write(data.decode())


EXPORT = Command(
    "export",
    "write a session as JSONL (every stored column; `import` restores it losslessly), as one "
    "HTML page, or send it as an OpenTelemetry trace",
    _configure_export,
    _run_export,
)
