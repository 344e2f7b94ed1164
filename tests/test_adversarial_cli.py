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
import os
import pty
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import msgspec
import pytest

from agent.cli import main
from eventlog import (
    APPEND,
    EventTypes,
    Message,
    TurnStart,
    UserMessage,
    ValidationError,
    open_store,
)
from projections import messages

from .pg_children.server import fresh_schema, raw_connection, store_url


def one_line_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """Run ``eventlog ARGS`` in this process; assert exit 2 and one error line; return it."""
    code: int | str | None
    try:
        code = main(list(args))
    except SystemExit as exc:  # argparse's usage errors end the parse this way
        code = exc.code
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


def _dsh_log(text: str) -> bytes:
    """A one-turn dsh log whose user message holds ``text``, written as a JS harness writes
    JSON: every character but the quote, backslash and C0 controls raw."""
    lines = [
        {"type": "session", "version": 0, "id": "harness", "createdAt": 1000},
        {"type": "turn/start", "data": {"turn": 1}},
        {
            "type": "user/message",
            "surfaceOp": "append",
            "data": {"role": "user", "id": "u1", "content": [{"type": "text", "text": text}]},
        },
        {"type": "turn/end", "data": {"turn": 1, "reason": "completed"}},
    ]
    return "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines).encode()


def test_a_dsh_line_holding_a_unicode_line_separator_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # U+2028/U+2029, NEL and the C0 file/group/record separators are valid raw inside a JSON
    # string; str.splitlines cut the line there and the whole log was refused as bad JSON.
    text = "one\u2028two\u2029three\x85four\x1cfive\x1dsix\x1eseven"
    log = tmp_path / "harness.jsonl"
    log.write_bytes(_dsh_log(text))
    db = tmp_path / "runs.db"
    assert main(["--db", str(db), "import", "--from", "dsh", str(log)]) == 0
    # Its summary counts in words a person reads: one event is "1 event"... (3 here)
    out = capsys.readouterr().out
    assert "harness: 3 events (3 core, 0 extension, 0 dsh/original) from 3 dsh events" in out
    assert "0 chunk events folded (0 packed rows)" in out

    # The stored message holds the text exactly.
    async def stored() -> str:
        async with open_store(f"sqlite:///{db}") as store:
            session = await store.open("harness")
            found = [m.text for m in messages(session)]
            await session.aclose()
        return found[0]

    assert anyio.run(stored) == text


def test_a_byte_order_mark_at_the_start_of_a_file_is_not_a_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An editor that saved the file added a UTF-8 BOM: both formats used to refuse line 1
    # ("JSON is malformed: invalid character (byte 0)").
    log = tmp_path / "harness.jsonl"
    log.write_bytes(b"\xef\xbb\xbf" + _dsh_log("hello"))
    db = tmp_path / "runs.db"
    assert main(["--db", str(db), "import", "--from", "dsh", str(log)]) == 0
    # The JSONL export of that session, with a BOM and CRLF line ends, imports under a new id.
    exported = tmp_path / "export.jsonl"
    assert main(["--db", str(db), "export", "harness", "-o", str(exported)]) == 0
    exported.write_bytes(b"\xef\xbb\xbf" + exported.read_bytes().replace(b"\n", b"\r\n"))
    capsys.readouterr()
    assert main(["--db", str(db), "import", str(exported), "--as", "again"]) == 0
    assert capsys.readouterr().out == "imported session again: 3 events\n"


def test_a_cut_export_of_one_event_says_1_event(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A session line promising three events and one event line: "ends after 1 event".
    log = tmp_path / "harness.jsonl"
    log.write_bytes(_dsh_log("hello"))
    db = tmp_path / "runs.db"
    assert main(["--db", str(db), "import", "--from", "dsh", str(log)]) == 0
    exported = tmp_path / "export.jsonl"
    assert main(["--db", str(db), "export", "harness", "-o", str(exported)]) == 0
    exported.write_bytes(b"".join(exported.read_bytes().splitlines(keepends=True)[:2]))
    capsys.readouterr()
    err = one_line_error(capsys, "--db", str(db), "import", str(exported), "--as", "cut")
    assert "ends after 1 event, its header (line 1) promises 3" in err


def _on_a_terminal(*args: str) -> tuple[int, str]:
    """Run ``eventlog ARGS`` with stdout and stderr on a pseudo-terminal; its exit code and
    everything the terminal received."""
    main_fd, child_fd = pty.openpty()
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "eventlog", *args],
            stdin=subprocess.DEVNULL,
            stdout=child_fd,
            stderr=child_fd,
        )
        os.close(child_fd)
        received = b""
        while True:
            try:
                chunk = os.read(main_fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            received += chunk
        return child.wait(timeout=60), received.decode("utf-8", "replace")
    finally:
        os.close(main_fd)


def test_export_never_writes_stored_bytes_to_a_terminal(tmp_path: Path) -> None:
    # A session whose metadata and message hold what a terminal acts on (as raw JSON, the
    # export keeps C1 controls and bidi overrides as they are: its hashes bind those bytes).
    hostile = "\x1b]0;pwned\x07 \x9b2J \u202eevil"
    db = tmp_path / "runs.db"

    async def fill() -> None:
        async with open_store(f"sqlite:///{db}") as store:
            session = await store.create("hostile", metadata={"note": hostile})
            session.append("turn/start", TurnStart(turn=1))
            message = UserMessage(message=Message.user(hostile))
            session.append("user/message", message, surface=APPEND)
            await session.aclose()

    anyio.run(fill)
    # On a terminal, both formats refuse in one line, before writing anything stored.
    for args in (("export", "hostile"), ("export", "hostile", "--format", "html")):
        code, shown = _on_a_terminal("--db", str(db), *args)
        assert code == 2, (args, shown)
        assert "which is not for a terminal: use -o FILE, or pipe it" in shown, args
        assert not set(shown) & set("\x1b\x07\x9b\u202e"), (args, shown)
        assert "pwned" not in shown
    # To a file, the bytes are exported as stored.
    out = tmp_path / "hostile.jsonl"
    assert main(["--db", str(db), "export", "hostile", "-o", str(out)]) == 0
    assert "\u202eevil" in out.read_text()


def test_show_refuses_a_range_the_log_does_not_have(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"

    async def fill() -> None:
        async with open_store(f"sqlite:///{db}") as store:
            session = await store.create("one")
            session.append("turn/start", TurnStart(turn=1))
            await session.aclose()
            await (await store.create("empty")).aclose()

    anyio.run(fill)
    # As replay --at: a --from past the head names the seqs there are (it printed an empty
    # table and exited 0, as if the events were not there).
    err = one_line_error(capsys, "--db", str(db), "show", "one", "--from", "1")
    assert "--from 1: session 'one' has events 0..0" in err
    # --to before --from can match nothing: said, not shown as an empty log.
    err = one_line_error(capsys, "--db", str(db), "show", "one", "--from", "1", "--to", "0")
    assert "--to 0 is before --from 1" in err
    # The defaults stay valid on every log, an empty one included.
    for sid in ("one", "empty"):
        assert main(["--db", str(db), "show", sid]) == 0
        assert main(["--db", str(db), "show", sid, "--from", "0", "--to", "0"]) == 0
    capsys.readouterr()


def test_an_unknown_option_points_at_its_commands_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The top parser reports what no parser took: the help to read is the command's own
    # (it said `eventlog --help`, which does not list `sessions`' options).
    err = one_line_error(capsys, "--db", "memory:", "sessions", "--state", "running")
    assert err.endswith(
        "unrecognized arguments: --state running (see `eventlog sessions --help`)\n"
    )
    err = one_line_error(capsys, "--db", "memory:", "show", "s1", "--nope", "--json")
    assert "(see `eventlog show --help`)" in err


def test_dsh_import_from_stdin_says_it_takes_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `-` is stdin for exports; for dsh it was looked up as a file named "-".
    err = one_line_error(capsys, "--db", str(tmp_path / "x.db"), "import", "--from", "dsh", "-")
    assert "--from dsh imports files; '-' (stdin) is read for exports only" in err
    assert list(tmp_path.iterdir()) == []


async def _schema_exists(schema: str) -> bool:
    conn = await raw_connection()
    try:
        found: bool = await conn.fetchval(
            "SELECT count(*) > 0 FROM pg_namespace WHERE nspname = $1", schema
        )
    finally:
        await conn.close()
    return found


@pytest.mark.postgres
def test_a_read_command_never_creates_a_postgresql_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with fresh_schema() as schema:
        url = store_url(schema)
        # A schema nobody made (a typo in ?schema=): every read command refuses in one line;
        # they used to create the schema and eventlog's tables in it, and list nothing.
        for args in READ_COMMANDS:
            err = one_line_error(capsys, "--db", url, *args)
            assert f"schema {schema!r} holds no eventlog tables; nothing was created" in err, (
                args,
                err,
            )
        assert anyio.run(_schema_exists, schema) is False
        # import creates the store; then the read commands read it.
        exported = tmp_path / "one.jsonl"
        exported.write_bytes(_dsh_log("hello"))
        assert main(["--db", url, "import", "--from", "dsh", str(exported), "--as", "s1"]) == 0
        assert main(["--db", url, "show", "s1"]) == 0
        capsys.readouterr()


class _Plain(msgspec.Struct, frozen=True, kw_only=True):
    text: str


class _Refusing(msgspec.Struct, frozen=True, kw_only=True):
    """An app's payload type whose own check raises something no one expects."""

    text: str

    def __post_init__(self) -> None:
        raise RuntimeError("the app's type refuses to load")


def refusing_types() -> EventTypes:
    """``--types`` target: ``app/x`` read as :class:`_Refusing`."""
    types = EventTypes()
    types.register("app/x", _Refusing, ignorable=True)
    return types


def test_an_unexpected_exception_is_one_line_unless_asked_for_its_traceback(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"

    async def fill() -> None:
        types = EventTypes()
        types.register("app/x", _Plain, ignorable=True)
        async with open_store(f"sqlite:///{db}", types=types) as store:
            session = await store.create("s1")
            session.append("app/x", _Plain(text="x"))
            await session.aclose()

    anyio.run(fill)
    spec = f"{__name__}:refusing_types"
    env = {k: v for k, v in os.environ.items() if k != "EVENTLOG_TRACEBACK"}
    command = [sys.executable, "-m", "eventlog", "--db", str(db), "--types", spec, "show", "s1"]
    # The app's payload raises RuntimeError on read: one line naming it (a traceback before).
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 2
    assert done.stderr == (
        "eventlog: error: unexpected error: RuntimeError: the app's type refuses to load "
        "(run again with EVENTLOG_TRACEBACK=1 to see where it was raised)\n"
    )
    # Asked for, the traceback shows where (the test suite runs every command this way).
    env["EVENTLOG_TRACEBACK"] = "1"
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 1 and "Traceback" in done.stderr
    assert "__post_init__" in done.stderr


async def _tables_of(schema: str) -> list[str]:
    conn = await raw_connection()
    try:
        rows = await conn.fetch(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = $1", schema
        )
    finally:
        await conn.close()
    return sorted(row[0] for row in rows)


def _refused_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """An export whose second event's hash was changed: refused once the store is open (also
    writes ``harness.jsonl``, a dsh log that imports)."""
    log = tmp_path / "harness.jsonl"
    log.write_bytes(_dsh_log("hello"))
    source = tmp_path / "source.db"
    assert main(["--db", str(source), "import", "--from", "dsh", str(log), "--as", "s1"]) == 0
    exported = tmp_path / "export.jsonl"
    assert main(["--db", str(source), "export", "s1", "-o", str(exported)]) == 0
    lines = exported.read_bytes().splitlines(keepends=True)
    event = json.loads(lines[2])
    event["hash"] = "ab" * 32
    exported.write_bytes(b"".join([*lines[:2], json.dumps(event).encode() + b"\n", *lines[3:]]))
    capsys.readouterr()
    return exported


def test_a_refused_import_leaves_another_applications_sqlite_database_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exported = _refused_export(tmp_path, capsys)
    path = tmp_path / "app.db"
    _foreign_database(path)
    # Refused: eventlog's tables, made when its store opened, used to stay in the file.
    err = one_line_error(capsys, "--db", str(path), "import", str(exported))
    assert "refusing to import" in err
    with contextlib.closing(sqlite3.connect(path)) as connection:
        names = [n for (n,) in connection.execute("SELECT name FROM sqlite_master")]
        users = connection.execute("SELECT name FROM users").fetchall()
    assert (names, users) == (["users"], [("ada",)])


@pytest.mark.postgres
def test_a_refused_import_leaves_postgresql_as_it_found_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exported = _refused_export(tmp_path, capsys)
    log = tmp_path / "harness.jsonl"
    with fresh_schema() as schema:
        # A schema that does not exist: the refusal used to leave it made, with the tables.
        err = one_line_error(capsys, "--db", store_url(schema), "import", str(exported))
        assert "refusing to import" in err
        assert anyio.run(_schema_exists, schema) is False
    with fresh_schema() as schema:
        # Another application's schema: only its own table is left.
        async def foreign() -> None:
            conn = await raw_connection()
            try:
                await conn.execute(f'CREATE SCHEMA "{schema}"')
                await conn.execute(f'CREATE TABLE "{schema}".users (id int)')
            finally:
                await conn.close()

        anyio.run(foreign)
        one_line_error(capsys, "--db", store_url(schema), "import", str(exported))
        assert anyio.run(_tables_of, schema) == ["users"]
        # An import that succeeds keeps the store it made.
        assert main(["--db", store_url(schema), "import", "--from", "dsh", str(log)]) == 0
        assert anyio.run(_tables_of, schema) == ["events", "meta", "sessions", "users"]
    capsys.readouterr()
