"""``eventlog`` entry point: parse arguments, run one command, map errors to exit codes."""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

import anyio
import msgspec

from eventlog import EventLogError

from ._commands import COMMANDS
from ._context import Context, resolve_url
from ._errors import EXIT_USAGE, CliError, exit_code_for, one_line
from ._output import Output
from ._registry import load_types
from ._safe import SafeStream

__all__ = ("TRACEBACK_VARIABLE", "build_parser", "main")

#: Set (to anything) in the environment, an unexpected exception (a bug, or an app's own code
#: raising, such as a ``--types`` payload's ``__post_init__``) ends the command with its
#: traceback instead of one line (the test suite sets it: a bug must show itself there, not
#: pass for a refusal).
TRACEBACK_VARIABLE = "EVENTLOG_TRACEBACK"

_EPILOG = """\
exit codes (one rule for every command; see docs/cli.md):
  0  intact and nothing owed: every session read is balanced, or running (a live writer)
  1  findings: a damaged log or database file; a session that needs repair (a turn open
     with no live writer: sessions, audit, recover); in audit also a call that failed or
     whose outcome is unknown, a failed model attempt, a turn that failed or a crash cut
  2  usage or input error: bad arguments, bad store URL, missing session or file, a
     missing extra (`pip install 'agent-eventlog[cli]'` for tables; --json never needs it)
With --json, an error is one JSON object on stderr: {"error": {"type", "message", "exit",
"seq"}}. Stored text is printed as data: control characters appear as \\uXXXX escapes.
store URL: --db, else $EVENTLOG_DB, else sqlite:///eventlog.db; a bare path means a SQLite file.
"""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and exit code 2) like every other error."""

    #: Set by :func:`main` when ``--json`` is on the command line (argparse fails before the
    #: parsed options exist, so the usage error is told how to speak).
    json_errors = False
    #: The command named on the command line, set by :func:`main`: the top parser reports the
    #: arguments no parser took, and the help to see is that command's.
    command: str | None = None

    def error(self, message: str) -> NoReturn:
        prog = self.prog
        if _Parser.command is not None and prog == "eventlog":
            prog = f"eventlog {_Parser.command}"
        text = f"{one_line(message)} (see `{prog} --help`)"
        _fail(text, "UsageError", EXIT_USAGE, json_mode=_Parser.json_errors)
        raise SystemExit(EXIT_USAGE)


def _common() -> _Parser:
    """Options every command accepts, before or after the command name."""
    common = _Parser(add_help=False)
    common.add_argument(
        "--db",
        metavar="URL",
        default=argparse.SUPPRESS,
        help="store URL (sqlite:///path.db, postgresql://…; memory: only for import, to check "
        "files without keeping them) or a SQLite file path",
    )
    common.add_argument(
        "--types",
        action="append",
        dest="type_registries",
        metavar="MODULE:ATTR",
        default=argparse.SUPPRESS,
        help="also read an app's event types: an EventTypes, or a function returning one or "
        "registering into one (repeatable; the integrations' types are always read)",
    )
    common.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print JSON for scripts instead of tables",
    )
    return common


def _version() -> str:
    """The installed distribution's version (``agent-eventlog``), or a word saying there is
    none (a checkout run through ``PYTHONPATH``)."""
    try:
        return importlib.metadata.version("agent-eventlog")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed: run from a checkout)"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with one subcommand per entry of :data:`COMMANDS`."""
    common = _common()
    parser = _Parser(
        prog="eventlog",
        description="Replay and audit durable agent sessions stored by eventlog.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        sub = commands.add_parser(
            command.name,
            help=command.help,
            description=command.help,
            parents=[common],
        )
        command.configure(sub)
        sub.set_defaults(run=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    words = list(sys.argv[1:] if argv is None else argv)
    _Parser.json_errors = "--json" in words
    names = {command.name for command in COMMANDS}
    _Parser.command = next((word for word in words if word in names), None)
    args = build_parser().parse_args(words)
    json_mode = getattr(args, "json", False)
    out = Output(json_mode=json_mode, command=args.command)
    try:
        types = load_types(getattr(args, "type_registries", ()))
        ctx = Context(url=resolve_url(getattr(args, "db", None)), out=out, types=types)
        code: int = anyio.run(args.run, args, ctx, backend="asyncio")
    except KeyboardInterrupt:
        return 0  # `follow` ends this way; anything interrupted has nothing more to say
    except BrokenPipeError:
        return _reader_left()
    except CliError as exc:
        _fail(exc.message, "CliError", exc.code, json_mode=json_mode)
        return exc.code
    except EventLogError as exc:
        code = exit_code_for(exc, args.command)
        _fail(str(exc), type(exc).__name__, code, json_mode=json_mode, seq=exc.seq)
        return code
    except OSError as exc:
        text = f"{exc.strerror or exc}" + (f": {exc.filename!r}" if exc.filename else "")
        _fail(text, type(exc).__name__, EXIT_USAGE, json_mode=json_mode)
        return EXIT_USAGE
    except Exception as exc:  # a bug of ours: still one line, and a way to see it whole
        if os.environ.get(TRACEBACK_VARIABLE):
            raise
        text = (
            f"unexpected error: {type(exc).__name__}: {exc} (run again with "
            f"{TRACEBACK_VARIABLE}=1 to see where it was raised)"
        )
        _fail(text, "UnexpectedError", EXIT_USAGE, json_mode=json_mode)
        return EXIT_USAGE
    return code


def _reader_left() -> int:
    """The reader of our output went away (``| head``): that is its choice, not an error.
    Point stdout at /dev/null so the interpreter's final flush does not complain."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass  # stdout is not a real file (tests capturing it): nothing to silence
    return 0


def _fail(message: str, kind: str, code: int, *, json_mode: bool, seq: int | None = None) -> None:
    """Report the error that ends the command: one line, or one JSON object under ``--json``
    (escaped for the terminal: a message may quote stored text)."""
    stderr = SafeStream(sys.stderr)
    if json_mode:
        error = {"type": kind, "message": one_line(message), "exit": code, "seq": seq}
        stderr.write(msgspec.json.encode({"error": error}).decode() + "\n")
    else:
        stderr.write(f"eventlog: error: {one_line(message)}\n")
    stderr.flush()


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
