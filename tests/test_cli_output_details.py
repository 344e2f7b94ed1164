"""Small things the command's output must get right: ``show``'s columns stay in line whatever
a cell holds, a ``request/header`` row says what changed, counts agree with their nouns."""

from __future__ import annotations

from pathlib import Path

import anyio
import msgspec
import pytest

from eventlog import EventTypes, RequestHeader, ToolSpec, TurnEnd, TurnStart, open_store

from .cli_fixtures import run_main, url_of

LONG_TYPE = "app/a-rather-long.type-name"


class Note(msgspec.Struct, frozen=True, kw_only=True):
    text: str


async def write(url: str) -> None:
    types = EventTypes()
    types.register(LONG_TYPE, Note, ignorable=True)  # the reader does not know it
    async with open_store(url, types=types) as store:
        session = await store.create("s1")
        session.append("turn/start", TurnStart(turn=1))
        session.append(LONG_TYPE, Note(text="first note"))
        session.append("request/header", RequestHeader(params={"temperature": 0}))
        session.append(
            "request/header",
            RequestHeader(model="gpt-x", tools=(ToolSpec(name="grep"), ToolSpec(name="ls"))),
        )
        session.append(LONG_TYPE, Note(text="second note"))
        session.append("turn/end", TurnEnd(turn=1, reason="completed"))
        await session.aclose()


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COLUMNS", "100")  # the width of a piped table
    path = tmp_path / "details.db"
    anyio.run(write, url_of(path))
    return path


def test_show_keeps_its_columns_in_line_with_a_long_ignorable_type(db: Path) -> None:
    lines = run_main("show", "s1", db=db).stdout.splitlines()
    # Every line fits, and every row's summary starts where the header's does.
    assert all(len(line) <= 100 for line in lines), lines
    start = lines[0].index("summary")
    rows = [line for line in lines[1:] if line[:6].strip().isdigit()]
    assert len(rows) == 6
    for row in rows:
        assert row[start - 1] == " " and row[start] != " ", row
    # The long type wraps inside its own column, marker included, under its row.
    type_start = lines[0].index("type")
    type_end = lines[0].index("surface")
    note = lines.index(next(r for r in rows if '"first note"' in r))
    pieces = [lines[note][type_start:type_end].strip()]
    for line in lines[note + 1 :]:
        if line[:6].strip():  # the next row
            break
        pieces.append(line[type_start:type_end].strip())
        assert line[:type_start].strip() == "" and line[type_end:].strip() == "", line
    assert "".join(pieces).replace(" ", "") == f"{LONG_TYPE}(ignorable)"


def test_a_header_row_says_what_changed(db: Path) -> None:
    out = run_main("show", "s1", "--type", "request/header", db=db).stdout
    assert 'params={"temperature":0}' in out and "model=None" not in out
    assert "model=gpt-x tools=grep,ls" in out


def test_counts_agree_with_their_nouns(db: Path) -> None:
    assert "1 session verified, 0 with findings" in run_main("verify", "--all", db=db).stdout
    assert "ok    s1  6 events, hash chain intact" in run_main("verify", "s1", db=db).stdout


def test_show_on_a_terminal_that_does_not_say_its_size(db: Path) -> None:
    # A real pseudo-terminal of size 0x0 (as a fresh pty is): rows are 80 wide, not one column.
    import os
    import pty
    import subprocess
    import sys

    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    try:
        child = subprocess.run(
            [sys.executable, "-m", "eventlog", "--db", url_of(db), "show", "s1"],
            stdout=follower,
            stderr=subprocess.PIPE,
            env=env,
            timeout=60,
            check=False,
        )
        os.close(follower)
        out = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal is closed once all is read
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(leader)
    assert child.returncode == 0, child.stderr
    lines = out.decode().splitlines()
    assert "summary" in lines[0] and max(len(line) for line in lines) <= 80
    assert any("turn 1 completed" in line for line in lines)


@pytest.mark.parametrize("format", ["jsonl", "html"])
def test_export_refuses_to_write_a_stored_file_to_a_terminal(db: Path, format: str) -> None:
    # The export is written byte for byte as stored (the chain covers those bytes), so it cannot
    # be escaped for a screen: on a real terminal it is refused, and nothing reaches the screen.
    import os
    import pty
    import subprocess
    import sys

    leader, follower = pty.openpty()
    try:
        command = [sys.executable, "-m", "eventlog", "--db", url_of(db), "export", "s1"]
        child = subprocess.run(
            [*command, "--format", format],
            stdout=follower,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
        os.set_blocking(leader, False)
        try:
            shown = os.read(leader, 65536)
        except BlockingIOError:  # nothing was written to the terminal
            shown = b""
    finally:
        os.close(follower)
        os.close(leader)
    assert child.returncode == 2
    assert shown == b""
    assert child.stderr.decode().count("\n") == 1
    assert "not for a terminal: use -o FILE, or pipe it" in child.stderr.decode()
    # The same export to a pipe or a file is the whole file.
    piped = run_main("export", "s1", "--format", format, db=db)
    assert piped.returncode == 0 and piped.stdout
