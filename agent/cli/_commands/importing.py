"""``import``: sessions from JSONL exports (or ``--from dsh`` logs), held to the rules a
commit is held to; nothing is half-imported."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from pathlib import Path
from typing import Any

import anyio
import msgspec

from eventlog import (
    AttachmentNotFoundError,
    CorruptLogError,
    EventLogError,
    ImportRefusedError,
    SessionNotFoundError,
    validate_session_id,
)
from eventlog.stores import (
    Departure,
    LogStore,
    check_import,
    rechain,
)

from ...report import counted
from .._context import Context, open_cli_store, sqlite_path, stored_record
from .._errors import EXIT_FINDINGS, EXIT_OK, CliError
from .._extras import optional
from .._jsonl import (
    ExportedSession,
    FormatError,
    parse_lines,
)
from .base import Command

__all__ = ("IMPORT",)


def _configure_import(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="files to import (- for stdin: exports only)"
    )
    parser.add_argument(
        "--from",
        dest="source",
        choices=("eventlog", "dsh"),
        default="eventlog",
        help="eventlog (JSONL from `export`, default) or dsh (DeepSeek Harness session logs)",
    )
    parser.add_argument(
        "--as",
        dest="as_id",
        metavar="ID",
        help="import the one session under this id (verified under its own, then chained anew "
        "under this one); without it, dsh logs keep the harness's session id when it is free",
    )
    parser.add_argument(
        "--accept-departures",
        action="store_true",
        help="exit 0 although the import departs from what commits would have written (a dsh "
        "event not imported as itself, a time raised, an export's time running backwards or "
        "parent not in the store); each departure is still reported",
    )


async def _run_import(args: argparse.Namespace, ctx: Context) -> int:
    """Import; a database file this import created (or found empty) is removed again (left
    empty) when it fails, and the PostgreSQL tables (and schema) it created are dropped, so a
    failed import leaves the database as it was."""
    path = sqlite_path(ctx.url)
    fresh = path is not None and not path.exists()
    empty = path is not None and path.is_file() and path.stat().st_size == 0
    tables = _sqlite_tables(path)
    schema = await _postgres_schema(ctx.url)
    try:
        if args.source == "dsh":
            return await _import_dsh(args, ctx)
        return await _import_exports(args, ctx)
    except BaseException:
        if (fresh or empty) and path is not None:
            _remove_database(path)
            if empty:
                path.touch()
        elif path is not None and tables is not None and not tables:
            # Another application's database: the tables this import's store made go again.
            from eventlog.stores.sqlite import drop_created as drop_sqlite_tables

            drop_sqlite_tables(path, tables)
        if schema is not None and not schema.holds_store:
            from eventlog.stores.postgres import drop_created

            with anyio.CancelScope(shield=True):
                await drop_created(ctx.url, schema)
        raise


def _sqlite_tables(path: Path | None) -> frozenset[str] | None:
    """Which of eventlog's tables the SQLite file holds before the import (``None``: not a
    SQLite store, or it cannot be told)."""
    if path is None:
        return None
    from eventlog.stores.sqlite import store_tables

    return store_tables(path)


async def _postgres_schema(url: str) -> Any:
    """What the PostgreSQL schema of ``url`` holds before the import (``None``: not a
    PostgreSQL URL, or it cannot be told)."""
    if not url.startswith(("postgresql://", "postgres://")):
        return None
    optional("asyncpg", "postgres", "a postgresql:// store")
    from eventlog.stores.postgres import holds_store

    return await holds_store(url)


def _remove_database(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


async def _import_exports(args: argparse.Namespace, ctx: Context) -> int:
    sessions = [s for name in args.files for s in _read_export(name)]
    new_id = None if args.as_id is None else validate_session_id(args.as_id)
    if new_id is not None and len(sessions) != 1:
        raise CliError(f"--as names one session; the files hold {len(sessions)}")
    async with open_cli_store(ctx.url, create=True, types=ctx.types) as store:
        # Check everything before writing anything: nothing is half-imported.
        departures = await _check_all(store, sessions)
        if new_id is not None:
            sessions = [_renamed(sessions[0], new_id)]
        present = [s for s in sessions if await _already_stored(store, s)]
        sessions = [s for s in sessions if s not in present]
        repaired = await _repair_attachments(store, present)
        await _write_all(store, sessions)
    imported: list[dict[str, Any]] = [{"id": s.record.id, "events": len(s.rows)} for s in sessions]
    if ctx.out.json_mode:
        ctx.out.json(
            {
                "imported": imported,
                "present": [s.record.id for s in present],
                "repaired_attachments": repaired,
                "departures": [text for text, _ in departures],
            }
        )
    else:
        for item in imported:
            ctx.out.line(f"imported session {item['id']}: {counted(item['events'], 'event')}")
        for exported in present:
            ctx.out.line(f"session {exported.record.id} is in the store already, identical")
        if present:
            ctx.out.line(f"{counted(len(repaired), 'damaged or missing attachment')} restored")
    for text, _ in departures:
        ctx.out.warn(text)
    return _exit_for(bool(departures), args)


def _exit_for(departed: bool, args: argparse.Namespace) -> int:
    """Findings when the import departed from the commit-time rules, unless accepted."""
    return EXIT_FINDINGS if departed and not args.accept_departures else EXIT_OK


async def _check_all(
    store: LogStore, sessions: list[ExportedSession]
) -> list[tuple[str, Departure]]:
    """Check every session (the rules of ``create`` and ``append``, see ``check_import``);
    return each departure with the line it is reported as.

    :raises ImportRefusedError: naming file, line and field; nothing may be imported.
    """
    found: list[tuple[str, Departure]] = []
    ids: set[str] = set()
    for exported in sessions:
        if exported.record.id in ids:
            raise CliError(
                f"{_where(exported, None)}: session {exported.record.id!r} is in the files "
                "twice; nothing was imported"
            )
        ids.add(exported.record.id)
    # A fork's parent and an attachment may come with any session of the import.
    attachments = {d: b for exported in sessions for d, b in exported.attachments.items()}
    for exported in sessions:
        sid = exported.record.id
        try:
            departures = await check_import(
                store, exported.record, exported.rows, attachments, parents=ids
            )
        except ImportRefusedError as exc:
            raise ImportRefusedError(
                f"{_where(exported, exc.seq)}: refusing to import: {exc.message}",
                field=exc.field,
                session_id=exc.session_id,
                seq=exc.seq,
                hint=exc.hint,
            ) from None
        found += [
            (f"{_where(exported, d.seq)}: field `{d.field}`: session {sid!r}: {d.reason}", d)
            for d in departures
        ]
    return found


def _where(exported: ExportedSession, seq: int | None) -> str:
    """``file:line`` of event ``seq`` (of the session line when ``None``)."""
    line = exported.line
    if seq is not None and 0 <= seq < len(exported.lines):
        line = exported.lines[seq]
    return f"{exported.file}:{line}"


async def _write_all(store: LogStore, sessions: list[ExportedSession]) -> None:
    """Store the checked sessions, every attachment first; if one fails, the sessions stored
    before it are deleted again."""
    written: list[str] = []
    try:
        for exported in sessions:
            for data in exported.attachments.values():
                await store.put_attachment(data)
        for exported in sessions:
            await store.restore(exported.record, exported.rows)
            written.append(exported.record.id)
    except BaseException:
        with anyio.CancelScope(shield=True):
            for sid in written:
                with contextlib.suppress(EventLogError):
                    await store.delete(sid, force=True)
        raise


def _renamed(exported: ExportedSession, new_id: str) -> ExportedSession:
    """``exported`` (verified under its own id) under ``new_id``: the chain binds the session
    id, so its events are chained anew (format 2), as a fork's are."""
    record = msgspec.structs.replace(exported.record, id=new_id)
    return dataclasses.replace(exported, record=record, rows=rechain(exported.rows, new_id))


def _read_export(name: str) -> list[ExportedSession]:
    try:
        if name == "-":
            return list(parse_lines(sys.stdin.buffer, "<stdin>"))
        with Path(name).open("rb") as file:
            return list(parse_lines(file, name))
    except FormatError as exc:
        raise CliError(str(exc)) from None


async def _already_stored(store: LogStore, exported: ExportedSession) -> bool:
    """Whether the store holds this very session already (its stored head and last hash are the
    export's: the chain binds every event before them), so importing it again changes no event
    and only restores its attachments (a backup repairs damaged bytes).

    :raises CliError: the store holds another session of that id; nothing was imported.
    """
    sid = exported.record.id
    try:
        record = await stored_record(store, sid)
    except SessionNotFoundError:
        return False
    last = exported.rows[-1] if exported.rows else None
    if last is None and record.head == -1:
        return True  # both without events: the same empty session
    if last is not None and record.head == last.seq:
        stored = [
            row async for chunk in store.read_rows(sid, last.seq, last.seq + 1) for row in chunk
        ]
        if stored and stored[0].hash == last.hash:
            return True
    raise CliError(
        f"session {sid!r} already exists in the store with other events; nothing was imported "
        "(--as NEW-ID imports it beside it)"
    )


async def _repair_attachments(store: LogStore, present: list[ExportedSession]) -> list[str]:
    """Put back each attachment of ``present`` that the store lacks or holds damaged (a put
    replaces bytes that do not hash to their digest, never good ones); return their digests."""
    restored: list[str] = []
    for exported in present:
        for digest, data in exported.attachments.items():
            try:
                await store.get_attachment(digest)
            except (AttachmentNotFoundError, CorruptLogError):
                await store.put_attachment(data)
                restored.append(digest)
    return restored


async def _import_dsh(args: argparse.Namespace, ctx: Context) -> int:
    # Only `import --from dsh` needs the importer.
    from eventlog.importers import ImportReport, import_dsh, parse_dsh, read_dsh_lines

    reports: list[ImportReport] = []
    if args.as_id is not None and len(args.files) != 1:
        raise CliError(f"--as names one session; {len(args.files)} files were given")
    if "-" in args.files:  # a dsh log is named in its session's metadata: it is a file
        raise CliError("--from dsh imports files; '-' (stdin) is read for exports only")
    # Every file is read and checked before the store is opened: a malformed line in any of
    # them imports nothing and leaves the database files as they were.
    for name in args.files:
        parse_dsh(read_dsh_lines(name), file=name)
    async with open_cli_store(ctx.url, create=True, types=ctx.types) as store:
        try:
            for name in args.files:  # each file is imported whole or not at all
                wanted = args.as_id or await _free_dsh_id(store, name)
                reports.append(await import_dsh(store, name, session_id=wanted))
        except BaseException:
            # A later file failed (its header refused as metadata, the store failing): the
            # sessions of the files before it go again, so no run is half-imported.
            with anyio.CancelScope(shield=True):
                for report in reports:
                    with contextlib.suppress(EventLogError):
                        await store.delete(report.session_id, force=True)
            raise
    if ctx.out.json_mode:
        ctx.out.json({"imported": [msgspec.to_builtins(r) for r in reports]})
    else:
        for report in reports:
            ctx.out.line(report.summary())
    for report in reports:
        changed = len(report.refused) + len(report.departures)
        if changed:
            ctx.out.warn(
                f"{report.file}: {counted(changed, 'dsh event')} refused or changed on the "
                "way in (listed in the report)"
            )
    return _exit_for(any(not r.complete for r in reports), args)


async def _free_dsh_id(store: LogStore, name: str) -> str | None:
    """The harness's own session id (the header's ``id``) when it is a valid id not taken in
    the store; else ``None`` (a random one). A header that does not parse is left to the
    importer, which reports it with file and line."""
    try:
        header = msgspec.json.decode(_first_line(name))
        harness_id = validate_session_id(header["id"])
    except (
        OSError,
        msgspec.DecodeError,
        EventLogError,
        KeyError,
        TypeError,
        ValueError,
        RecursionError,
    ):
        return None
    try:
        await stored_record(store, harness_id)
    except SessionNotFoundError:
        return harness_id
    return None


def _first_line(name: str) -> bytes:
    with Path(name).open("rb") as file:  # one line of a local file: no need for a thread
        # Without the byte-order mark an editor may have put first (the importer drops it).
        return file.readline().removeprefix(b"\xef\xbb\xbf")


IMPORT = Command(
    "import",
    "import sessions from JSONL exports (or --from dsh: DeepSeek Harness logs)",
    _configure_import,
    _run_import,
)
