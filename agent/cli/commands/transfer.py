"""``export`` (one session as JSONL) and ``import`` (JSONL exports, or ``--from dsh`` logs)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Protocol

import msgspec

from eventlog import EventLogError, SessionNotFoundError
from eventlog.codec import GENESIS_HASH, verify_rows
from eventlog.loader import LogLoader
from eventlog.stores import LogStore

from ..context import Context, open_cli_store, stored_record
from ..errors import EXIT_FINDINGS, EXIT_OK, CliError
from ..jsonl import ExportedSession, FormatError, event_line, parse_lines, session_line
from .base import Command

__all__ = ("EXPORT", "IMPORT")


def _configure_export(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session_id", metavar="ID")
    parser.add_argument(
        "-o", "--output", metavar="FILE", help="write to FILE instead of standard output"
    )


async def _run_export(args: argparse.Namespace, ctx: Context) -> int:
    async with open_cli_store(ctx.url) as store:
        record = await stored_record(store, args.session_id)
        with _target(args.output, ctx) as out:
            out.write(session_line(record) + b"\n")
            prev, fault = GENESIS_HASH, None
            # Up to the head read above: a live writer's later events belong to a later export.
            async for chunk in store.backend.read_rows(record.id, 0, record.head + 1):
                rows = list(chunk)
                out.write(b"".join(event_line(row) + b"\n" for row in rows))
                if fault is None:
                    try:
                        verify_rows(rows, prev, rows[0].seq, session_id=record.id)
                    except EventLogError as exc:
                        fault = exc
                prev = rows[-1].hash if rows else prev
    if fault is not None:
        ctx.out.warn(f"{fault}; exported as stored, but `import` will refuse it")
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


def _configure_import(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="files to import (- for stdin)")
    parser.add_argument(
        "--from",
        dest="source",
        choices=("eventlog", "dsh"),
        default="eventlog",
        help="eventlog (JSONL from `export`, default) or dsh (DeepSeek Harness session logs)",
    )


async def _run_import(args: argparse.Namespace, ctx: Context) -> int:
    if args.source == "dsh":
        return await _import_dsh(args, ctx)
    sessions = [s for name in args.files for s in _read_export(name)]
    async with open_cli_store(ctx.url, create=True) as store:
        # Check everything before writing anything: nothing is half-imported.
        for exported in sessions:
            _check(store, exported)
            await _must_be_new(store, exported.record.id)
        for exported in sessions:
            await store.backend.create_session(exported.record, exported.rows)
    imported = [{"id": s.record.id, "events": len(s.rows)} for s in sessions]
    if ctx.out.json_mode:
        ctx.out.json({"imported": imported})
    else:
        for item in imported:
            ctx.out.line(f"imported session {item['id']}: {item['events']} events")
    return EXIT_OK


def _read_export(name: str) -> list[ExportedSession]:
    try:
        if name == "-":
            return list(parse_lines(sys.stdin.buffer, "<stdin>"))
        with Path(name).open("rb") as file:
            return list(parse_lines(file, name))
    except FormatError as exc:
        raise CliError(str(exc)) from None


def _check(store: LogStore, exported: ExportedSession) -> None:
    """Verify the chain, decode every event and replay the surface: ``open``'s own loader."""
    sid = exported.record.id
    where = f"line {exported.line}"
    loader = LogLoader(store.types, sid)
    try:
        loader.feed(exported.rows)
    except EventLogError as exc:
        if exc.seq is not None and 0 <= exc.seq < len(exported.lines):
            where = f"line {exported.lines[exc.seq]}"
        raise CliError(f"refusing to import ({where}): {exc}") from None
    if loader.misfit is not None:
        # A log append would have refused (a turn opened twice, a step out of order, ...).
        seq, why = loader.misfit
        if 0 <= seq < len(exported.lines):
            where = f"line {exported.lines[seq]}"
        raise CliError(f"refusing to import ({where}): session {sid!r}, seq {seq}: {why}")


async def _must_be_new(store: LogStore, session_id: str) -> None:
    try:
        await stored_record(store, session_id)
    except SessionNotFoundError:
        return
    raise CliError(f"session {session_id!r} already exists in the store; nothing was imported")


async def _import_dsh(args: argparse.Namespace, ctx: Context) -> int:
    from eventlog.importers import ImportReport, import_dsh  # only `import --from dsh` needs it

    reports: list[ImportReport] = []
    async with open_cli_store(ctx.url, create=True) as store:
        for name in args.files:  # one at a time: each file is imported whole or not at all
            reports.append(await import_dsh(store, name))  # noqa: PERF401
    if ctx.out.json_mode:
        ctx.out.json({"imported": [msgspec.to_builtins(r) for r in reports]})
    else:
        for report in reports:
            ctx.out.line(report.summary())
    return EXIT_OK


EXPORT = Command(
    "export",
    "write a session as JSONL (every stored column; `import` restores it losslessly)",
    _configure_export,
    _run_export,
)
IMPORT = Command(
    "import",
    "import sessions from JSONL exports (or --from dsh: DeepSeek Harness logs)",
    _configure_import,
    _run_import,
)
