"""Exit code 2 and exactly one line on stderr, never a traceback, for bad input."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from agent.cli import main

from .cli_fixtures import cli, run_main, shared_runs_db, url_of


@pytest.fixture
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_runs_db(tmp_path_factory)  # read-only here


def assert_one_line_error(result: subprocess.CompletedProcess[str], text: str) -> None:
    assert result.returncode == 2
    stderr: str = result.stderr
    assert "Traceback" not in stderr
    assert stderr.count("\n") == 1, stderr
    assert stderr == f"eventlog: error: {text}\n"


def test_missing_session(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("show", "recover", "follow"):
        assert_one_line_error(cli(command, "nope", db=db), "session 'nope' does not exist")
    # The same through main() in-process, for every other command that takes an ID.
    for args in (["replay", "nope"], ["audit", "nope"], ["verify", "nope"], ["export", "nope"]):
        assert main(["--db", url_of(db), *args]) == 2
        assert capsys.readouterr().err == "eventlog: error: session 'nope' does not exist\n"
    assert main(["--db", url_of(db), "fork", "nope", "--at", "0"]) == 2


def test_malformed_session_id(db: Path) -> None:
    result = cli("show", "../etc/passwd", db=db)
    assert_one_line_error(
        result,
        "session id '../etc/passwd' is not valid: use 1-128 letters, digits or '._:@-', "
        "starting with a letter or digit (hint: ids are never paths; pick a plain identifier)",
    )


def test_bad_url(db: Path) -> None:
    assert_one_line_error(
        cli("sessions", db="bogus://host/x"),
        "unsupported store URL 'bogus://host/x': use 'memory:', 'sqlite:///path.db' or "
        "'postgresql://user@host:port/db'",
    )
    assert_one_line_error(
        cli("sessions", db="sqlite://relative.db"),
        "malformed SQLite URL 'sqlite://relative.db': use 'sqlite:///relative/path.db' or "
        "'sqlite:////absolute/path.db' (hint: for a store without a file use 'memory:')",
    )


def test_missing_file_is_not_created(tmp_path: Path) -> None:
    path = tmp_path / "typo.db"
    assert_one_line_error(
        cli("sessions", db=path), f"no database at '{path}' (store URL '{url_of(path)}')"
    )
    assert not path.exists()


def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database\n" * 200)
    result = cli("sessions", db=path)
    assert result.returncode == 2
    assert result.stderr.startswith(f"eventlog: error: SQLite database {path}")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_usage_errors_are_one_line() -> None:
    result = cli("replay", "x", "--format", "yaml")
    assert_one_line_error(
        result,
        "argument --format: invalid choice: 'yaml' (choose from 'text', 'openai', 'anthropic', "
        "'json') (see `eventlog replay --help`)",
    )
    assert_one_line_error(
        cli("fork", "x"),
        "the following arguments are required: --at (see `eventlog fork --help`)",
    )
    assert_one_line_error(
        cli("show", "x", "--from", "-3"),
        "argument --from: expected 0 or more, got -3 (see `eventlog show --help`)",
    )


def test_store_from_environment_and_default(db: Path, tmp_path: Path) -> None:
    by_env = cli("sessions", "--json", EVENTLOG_DB=url_of(db))
    assert by_env.returncode == 1 and '"balanced"' in by_env.stdout  # damaged ones: 1
    bare_path = cli("verify", "balanced", EVENTLOG_DB=str(db))
    assert bare_path.returncode == 0
    default = cli("sessions", cwd=tmp_path)
    # Nothing named: the message says it read the default and how to name another store.
    assert_one_line_error(
        default,
        "no database at 'eventlog.db' (store URL 'sqlite:///eventlog.db', the default: name "
        "yours with --db URL or $EVENTLOG_DB)",
    )


def test_console_script_and_option_after_the_command(db: Path) -> None:
    script = Path(sys.executable).parent / "eventlog"
    result = subprocess.run(
        [str(script), "verify", "balanced", "--db", url_of(db)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok    balanced")


def test_a_memory_store_is_refused_where_there_is_nothing_to_read(db: Path, tmp_path: Path) -> None:
    # A new process's memory: store is empty: a read would answer "no sessions", exit 0.
    for args in (("sessions",), ("verify", "--all"), ("show", "x")):
        assert_one_line_error(
            run_main(*args, db="memory:"),
            "store URL 'memory:' is a new, empty store in every process: there is nothing to "
            "read (name yours with --db sqlite:///path.db or postgresql://…)",
        )
    # import takes it: the files are checked against the import rules and kept nowhere.
    export = tmp_path / "balanced.jsonl"
    exported = run_main("export", "balanced", "-o", str(export), db=db)
    assert exported.returncode == 0, exported.stderr
    checked = run_main("import", str(export), db="memory:")
    assert checked.returncode == 0 and "imported session balanced" in checked.stdout


def test_version() -> None:
    # --version answers without a command (the distribution's version, or that there is none).
    result = cli("--version")
    assert result.returncode == 0 and result.stderr == ""
    assert re.fullmatch(
        r"eventlog (\d+\.\d+\S*|\(not installed: run from a checkout\))\n", result.stdout
    )


@pytest.mark.postgres
def test_a_read_on_a_postgresql_schema_that_is_not_a_store_creates_nothing(
    db: Path, tmp_path: Path
) -> None:
    # The PostgreSQL twin of "no database at": a mistyped ?schema= is refused in one line and
    # the schema is not created behind it.
    import anyio

    from tests.pg_children.server import fresh_schema, raw_connection, store_url

    async def schema_exists(name: str) -> bool:
        conn = await raw_connection()
        try:
            found: bool = await conn.fetchval(
                "SELECT count(*) > 0 FROM pg_namespace WHERE nspname = $1", name
            )
            return found
        finally:
            await conn.close()

    with fresh_schema() as schema:
        for args in (("sessions", "--json"), ("verify", "--all"), ("show", "x")):
            result = run_main(*args, db=store_url(schema))
            assert result.returncode == 2, result.stderr
            assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
            assert f"schema {schema!r} holds no eventlog tables; nothing was created" in (
                result.stderr
            )
        assert not anyio.run(schema_exists, schema)
        # import writes: it creates the store as before, and the reads then find it.
        export = tmp_path / "balanced.jsonl"
        assert run_main("export", "balanced", "-o", str(export), db=db).returncode == 0
        assert run_main("import", str(export), db=store_url(schema)).returncode == 0
        assert run_main("verify", "--all", db=store_url(schema)).returncode == 0


def test_every_option_of_every_command_says_what_it_does() -> None:
    # `eventlog show --help` listed --from SEQ and --to SEQ with no word on what they do.
    import argparse

    from agent.cli import _main

    parser = _main.build_parser()
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    silent = [
        f"{name} {action.option_strings[0]}"
        for name, sub in commands.choices.items()
        for action in sub._actions
        if action.option_strings and not action.help
    ]
    assert silent == []
