"""Inputs an outside tester throws at the ``eventlog`` command: each gets one line on stderr and
exit 2 (never a traceback), and leaves the store as it was.

Every case here once escaped as a traceback or a wrong line: malformed PostgreSQL URLs (asyncpg
parses them only when it connects), an app's ``--types`` function that raises.
"""

from __future__ import annotations

import pytest

from agent.cli import main
from eventlog import ValidationError, open_store


def one_line_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """Run ``eventlog ARGS`` in this process; assert exit 2 and one error line; return it."""
    code = main(list(args))
    captured = capsys.readouterr()
    assert code == 2, (args, captured)
    assert captured.err.count("\n") == 1 and captured.err.startswith("eventlog: error: "), (
        args,
        captured.err,
    )
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
