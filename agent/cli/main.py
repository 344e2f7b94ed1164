"""``eventlog`` entry point: parse arguments, run one command, map errors to exit codes."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

import anyio

from eventlog import EventLogError

from .commands import COMMANDS
from .context import Context, resolve_url
from .errors import EXIT_USAGE, CliError, exit_code_for, one_line
from .output import Output

__all__ = ("build_parser", "main")

_EPILOG = """\
exit codes: 0 fine, 1 findings (a damaged log, a session needing repair), 2 usage or input
error (bad arguments, bad store URL, missing session or file).
store URL: --db, else $EVENTLOG_DB, else sqlite:///eventlog.db; a bare path means a SQLite file.
"""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and exit code 2) like every other error."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"eventlog: error: {one_line(message)} (see `{self.prog} --help`)\n")
        raise SystemExit(EXIT_USAGE)


def _common() -> _Parser:
    """Options every command accepts, before or after the command name."""
    common = _Parser(add_help=False)
    common.add_argument(
        "--db",
        metavar="URL",
        default=argparse.SUPPRESS,
        help="store URL (sqlite:///path.db, postgresql://…, memory:) or a SQLite file path",
    )
    common.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print JSON for scripts instead of tables",
    )
    return common


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
    args = build_parser().parse_args(argv)
    out = Output(json_mode=getattr(args, "json", False))
    try:
        ctx = Context(url=resolve_url(getattr(args, "db", None)), out=out)
        code: int = anyio.run(args.run, args, ctx, backend="asyncio")
    except KeyboardInterrupt:
        return 0  # `follow` ends this way; anything interrupted has nothing more to say
    except BrokenPipeError:
        return _reader_left()
    except CliError as exc:
        _fail(exc.message)
        return exc.code
    except EventLogError as exc:
        _fail(str(exc))
        return exit_code_for(exc)
    except OSError as exc:
        _fail(f"{exc.strerror or exc}" + (f": {exc.filename!r}" if exc.filename else ""))
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


def _fail(message: str) -> None:
    sys.stderr.write(f"eventlog: error: {one_line(message)}\n")
    sys.stderr.flush()


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
