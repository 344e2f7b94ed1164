"""Commands that change a store, run as subprocesses: recover --apply, export/import, fork,
follow. Each test works on its own copy of the fixture file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from eventlog import TurnStart, open_store

from .cli_fixtures import (
    CORRUPT_SEQ,
    CRASH_STOP,
    Note,
    cli,
    cli_types,
    copy_db,
    run_main,
    shared_runs_db,
    the_run,
    url_of,
)


@pytest.fixture
def db(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Path:
    return copy_db(shared_runs_db(tmp_path_factory), tmp_path / "runs.db")


def test_recover_apply_repairs_once(db: Path) -> None:
    first = cli("recover", "crashed", "--apply", "--json", db=db)
    assert first.returncode == 0, first.stderr
    doc = json.loads(first.stdout)
    assert doc["applied"] is True
    assert [a["seq"] for a in doc["appended"]] == list(range(CRASH_STOP, CRASH_STOP + 5))
    assert [a["type"] for a in doc["appended"]][-2:] == ["step/end", "turn/end"]
    second = cli("recover", "crashed", "--apply", db=db)
    assert second.returncode == 0
    assert second.stdout.endswith("nothing to repair\n")
    # The repaired session now matches the one repaired when the fixture was built.
    calls = json.loads(run_main("audit", "crashed", "--json", db=db).stdout)["calls"]
    reference = json.loads(run_main("audit", "repaired", "--json", db=db).stdout)["calls"]
    assert calls == reference


def test_recover_apply_on_a_corrupt_session_is_a_finding(db: Path) -> None:
    result = cli("recover", "corrupt", "--apply", db=db)
    assert result.returncode == 1
    assert result.stderr.startswith(
        f"eventlog: error: session 'corrupt', seq {CORRUPT_SEQ}: hash mismatch"
    )
    assert result.stderr.count("\n") == 1


def test_export_import_round_trip(db: Path, tmp_path: Path) -> None:
    # `balanced` has a compaction and an app extension event; `crashed` an open step.
    files = [tmp_path / "balanced.jsonl", tmp_path / "crashed.jsonl"]
    for file in files:
        assert cli("export", file.stem, "-o", str(file), db=db).returncode == 0
    target = tmp_path / "copy.db"
    result = cli("import", *map(str, files), db=target)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        f"imported session balanced: {len(the_run()) + 1} events\n"
        f"imported session crashed: {CRASH_STOP} events\n"
    )
    # The comparisons run in-process: only the two commands above need a real command line.
    assert run_main("verify", "--all", db=target).returncode == 0
    listed = json.loads(run_main("sessions", "--json", db=target).stdout)["sessions"]
    original = json.loads(run_main("sessions", "--json", db=db).stdout)["sessions"]
    assert listed == [s for s in original if s["id"] in ("balanced", "crashed")]
    replay = ["replay", "balanced", "--format", "anthropic"]
    assert run_main(*replay, db=target).stdout == run_main(*replay, db=db).stdout


def test_export_to_stdout_carries_every_column(db: Path) -> None:
    result = cli("export", "balanced", db=db)
    assert result.returncode == 0
    header, *events = (json.loads(line) for line in result.stdout.splitlines())
    assert header["kind"] == "session" and header["id"] == "balanced"
    assert header["metadata"] == {"run": "balanced"}
    assert header["head"] == len(events) - 1
    assert set(events[0]) == {
        "kind",
        "seq",
        "type",
        "time",
        "surface",
        "sources",
        "ignorable",
        "hash",
        "data",
    }
    note = events[-1]
    assert note["type"] == "app/note" and note["ignorable"] is True
    assert note["data"] == {"text": "reviewed by the auditor"}


def test_export_of_a_corrupt_session_warns_and_import_refuses_it(db: Path, tmp_path: Path) -> None:
    exported = tmp_path / "corrupt.jsonl"
    result = cli("export", "corrupt", "-o", str(exported), db=db)
    assert result.returncode == 1
    assert "seq 2: hash mismatch" in result.stderr
    refused = cli("import", str(exported), db=tmp_path / "other.db")
    assert refused.returncode == 2
    assert refused.stderr == (
        f"eventlog: error: {exported}:{CORRUPT_SEQ + 2}: refusing to import: field `hash`: "
        f"session 'corrupt', seq {CORRUPT_SEQ}: hash mismatch, the stored event was altered or "
        "damaged\n"
    )


def test_import_refuses_an_existing_id_and_a_cut_file(db: Path, tmp_path: Path) -> None:
    exported = tmp_path / "open.jsonl"
    cli("export", "open", "-o", str(exported), db=db)
    # The same session imported again changes nothing: it is there already, identical.
    again = cli("import", str(exported), db=db)
    assert again.returncode == 0, again.stderr
    assert "session open is in the store already, identical" in again.stdout
    # Another session of the same id is refused, and nothing is written.
    other_db = tmp_path / "other.db"

    async def another_open() -> None:
        async with open_store(url_of(other_db)) as store:
            session = await store.create("open")
            session.append("turn/start", TurnStart(turn=1))
            await session.aclose()

    anyio.run(another_open)
    other = tmp_path / "other-open.jsonl"
    cli("export", "open", "-o", str(other), db=other_db)
    files = [db, db.with_name(db.name + "-wal")]
    before = [f.read_bytes() if f.exists() else None for f in files]
    taken = cli("import", str(other), db=db)
    assert taken.returncode == 2
    assert taken.stderr == (
        "eventlog: error: session 'open' already exists in the store with other events; "
        "nothing was imported (--as NEW-ID imports it beside it)\n"
    )
    assert [f.read_bytes() if f.exists() else None for f in files] == before
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(exported.read_text().splitlines(keepends=True)[:-1]))
    result = cli("import", str(cut), db=tmp_path / "new.db")
    assert result.returncode == 2
    assert result.stderr == (
        f"eventlog: error: {cut}:4: session 'open' ends after 3 events, its header (line 1) "
        "promises 4; the file is cut\n"
    )
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text('{"kind": "session"\n')
    result = cli("import", str(garbage), db=tmp_path / "new.db")
    assert result.returncode == 2
    assert result.stderr.startswith(f"eventlog: error: {garbage}:1: not an eventlog export line")


def test_import_from_stdin(db: Path, tmp_path: Path) -> None:
    exported = cli("export", "repaired", db=db).stdout
    result = cli("import", "-", db=tmp_path / "piped.db", stdin=exported)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"imported session repaired: {CRASH_STOP + 5} events\n"


async def _recover_while_held(url: str) -> subprocess.CompletedProcess[bytes]:
    from eventlog import open_store

    async with open_store(url) as store:
        writer = await store.open("crashed")  # this live process holds the lease
        try:
            command = [sys.executable, "-m", "eventlog", "--db", url, "recover", "crashed"]
            return await anyio.run_process([*command, "--apply"], check=False)
        finally:
            await writer.aclose()


def test_recover_apply_while_a_live_writer_holds_the_session(db: Path) -> None:
    result = anyio.run(_recover_while_held, url_of(db))
    assert result.returncode == 2
    stderr = result.stderr.decode()
    assert stderr.startswith("eventlog: error: session 'crashed' is open for writing by ")
    assert stderr.count("\n") == 1
    assert cli("recover", "crashed", db=db).returncode == 1  # still needs repair


def test_fork(db: Path) -> None:
    turn_ends = [
        e["seq"]
        for e in json.loads(
            run_main("show", "balanced", "--json", "--type", "turn/end", db=db).stdout
        )["events"]
    ]
    result = cli("fork", "balanced", "--at", str(turn_ends[0]), "--json", db=db)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["parent"] == "balanced" and doc["head"] == turn_ends[0] + 1
    child = json.loads(run_main("show", doc["id"], "--json", db=db).stdout)["events"]
    assert child[-1]["type"] == "session/forked"
    assert child[-1]["data"] == {"parent": "balanced", "boundary": turn_ends[0]}
    inside = cli("fork", "balanced", "--at", str(turn_ends[0] - 1), db=db)
    assert inside.returncode == 2
    assert "is inside turn 1, which is still open there" in inside.stderr


async def _append_notes(url: str, session_id: str, texts: list[str]) -> None:
    from eventlog import open_store

    async with open_store(url, types=cli_types()) as store:
        session = await store.open(session_id)
        for text in texts:
            session.append("app/note", Note(text=text))
        await session.aclose()


def _start_follow(db: Path, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "EVENTLOG_DB"}
    return subprocess.Popen(
        [sys.executable, "-m", "eventlog", "--db", url_of(db), "follow", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_follow_prints_stored_then_live_events(db: Path) -> None:
    # `open` holds 4 events; follow waits for 2 more, which another process appends.
    with _start_follow(db, "open", "--json", "--count", "6") as follower:
        try:
            assert follower.stdout is not None
            first = [json.loads(follower.stdout.readline()) for _ in range(4)]
            assert [e["seq"] for e in first] == [0, 1, 2, 3]
            anyio.run(_append_notes, url_of(db), "open", ["live one", "live two"])
            out, err = follower.communicate(timeout=30)
        finally:
            follower.kill()
    assert follower.returncode == 0, err
    live = [json.loads(line) for line in out.splitlines()]
    assert [(e["seq"], e["data"]["text"]) for e in live] == [(4, "live one"), (5, "live two")]


def test_follow_ends_quietly_when_its_reader_goes_away(db: Path) -> None:
    with _start_follow(db, "open", "--after", "2") as follower:
        try:
            assert follower.stdout is not None
            assert "turn/start" in follower.stdout.readline()  # seq 3
            follower.stdout.close()  # like `| head -1`
            anyio.run(_append_notes, url_of(db), "open", ["nobody reads this"])
            _, err = follower.communicate(timeout=30)
        finally:
            follower.kill()
    assert follower.returncode == 0
    assert err == ""


def test_follow_ends_cleanly_on_interrupt(db: Path) -> None:
    with _start_follow(db, "open") as follower:
        try:
            assert follower.stdout is not None
            assert "turn/start" in "".join(follower.stdout.readline() for _ in range(4))
            follower.send_signal(signal.SIGINT)
            _, err = follower.communicate(timeout=30)
        finally:
            follower.kill()
    assert follower.returncode == 0
    assert err == ""
