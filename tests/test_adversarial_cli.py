"""Inputs an outside tester throws at the ``eventlog`` command: each gets one line on stderr and
exit 2 (never a traceback), and leaves the store as it was.

Every case here once escaped as a traceback or a wrong line: malformed PostgreSQL URLs (asyncpg
parses them only when it connects), an app's ``--types`` function that raises; and one left a
file changed: a read command pointed at another application's database (or an empty file)
wrote eventlog's tables into it.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

import pytest

from agent.cli import main
from eventlog import ValidationError, open_store


def one_line_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """Run ``eventlog ARGS`` in this process; assert exit 2 and one error line; return it."""
    code = main(list(args))
    captured = capsys.readouterr()
    assert code == 2, (args, captured)
    assert captured.err.count("\n") == 1, (args, captured.err)
    if "--json" in args:  # one JSON object, for scripts
        assert json.loads(captured.err)["error"]["exit"] == 2, (args, captured.err)
    else:
        assert captured.err.startswith("eventlog: error: "), (args, captured.err)
    return captured.err


@pytest.mark.parametrize(
    ("url", "said"),
    [
        # An unclosed IPv6 bracket: urlsplit raised ValueError out of the constructor.
        ("postgresql://postgres@[::1:5432/db", "Invalid IPv6 URL"),
        # A port past 65535: the socket raised OverflowError at connect time.
        ("postgresql://postgres@127.0.0.1:99999/db", "port '99999' is not a number"),
        # A port that is not a number: asyncpg's parser raised ValueError.
        ("postgresql://postgres@127.0.0.1:abc/db", "port 'abc' is not a number"),
        # The same in the second of several hosts, with a password that stays masked.
        ("postgres://u:s3cret@127.0.0.1:5432,[::1]:0/db", "port '0' is not a number"),
    ],
)
def test_a_malformed_postgresql_url_is_one_line(
    capsys: pytest.CaptureFixture[str], url: str, said: str
) -> None:
    # The command says what is wrong with the URL, in one line, without the password.
    err = one_line_error(capsys, "--db", url, "sessions")
    assert "malformed PostgreSQL URL" in err and said in err, err
    assert "s3cret" not in err
    # The library refuses it the same way, with its own typed error, before connecting.
    with pytest.raises(ValidationError, match="malformed PostgreSQL URL"):
        open_store(url)


def test_a_types_function_that_raises_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    # json.loads takes one argument, so it is called with the registry, and raises TypeError.
    err = one_line_error(capsys, "--db", "memory:", "--types", "json:loads", "sessions")
    assert "--types 'json:loads': calling it raised TypeError" in err
    # A function taking no argument that raises is named the same way.
    err = one_line_error(capsys, "--db", "memory:", "--types", "os:abort.__class__", "sessions")
    assert "--types 'os:abort.__class__'" in err


def _foreign_database(path: Path) -> None:
    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        connection.execute("INSERT INTO users (name) VALUES ('ada')")
        connection.commit()


READ_COMMANDS = (
    ("sessions",),
    ("show", "s1"),
    ("replay", "s1"),
    ("audit", "s1", "--json"),
    ("verify", "--all"),
    ("recover", "s1"),
    ("export", "s1"),
    ("follow", "s1", "--count", "1"),
)


@pytest.mark.parametrize("kind", ["another application's database", "an empty file"])
def test_a_read_command_never_writes_eventlog_tables_into_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    # A path that names a database of someone else's, or a file just touched.
    path = tmp_path / "app.db"
    if kind == "an empty file":
        path.touch()
    else:
        _foreign_database(path)
    before = path.read_bytes()
    # Every read command refuses in one line and leaves the file byte for byte (it used to
    # create eventlog's tables in it, and list an empty store).
    for args in READ_COMMANDS:
        err = one_line_error(capsys, "--db", str(path), *args)
        assert "holds no eventlog store" in err, (args, err)
        assert path.read_bytes() == before, args
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]
