"""The command telling failures apart: error codes and failed attempts in ``audit``, exit codes
as documented, JSON errors, tables that fit 80 columns, ``show`` streaming with a limit,
``running`` for a session whose writer is alive, ``--salvage`` and ``import --as``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import anyio
import pytest

from .cli_fixtures import (
    CORRUPT_SEQ,
    FAILED_CALLS,
    HeldOpen,
    cli,
    copy_db,
    play_failures,
    run_main,
    shared_runs_db,
    url_of,
)
from .dsh_logs import DSH_LOGS, needs_dsh_logs


@pytest.fixture
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_runs_db(tmp_path_factory)  # read-only here


@pytest.fixture(scope="module")
def failures(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("failures") / "failures.db"
    anyio.run(play_failures, url_of(path))
    return path


# -- audit -------------------------------------------------------------------------------------


def test_audit_names_each_error_code_and_the_failed_attempt(failures: Path) -> None:
    # A real agent run: four tools failed four ways after one failed model attempt.
    result = cli("audit", "failures", "--json", db=failures)
    assert result.returncode == 1  # something failed
    doc = json.loads(result.stdout)
    by_name = {c["name"]: c for c in doc["calls"]}
    assert {n: (c["outcome"], c["error"]["code"]) for n, c in by_name.items()} == {
        name: ("error", code) for name, code in FAILED_CALLS.items()
    }
    # The failed attempt is listed with its seq and the model's error.
    (attempt,) = doc["failed_attempts"]
    assert attempt["turn"] == 1 and attempt["step"] == 1
    assert "upstream 503" in attempt["error"]
    assert doc["state"] == "balanced" and doc["integrity"]["ok"] is True
    # The table says the same, with every code whole.
    table = cli("audit", "failures", db=failures)
    assert table.returncode == 1
    for code in FAILED_CALLS.values():
        assert code in table.stdout
    assert f"(seq {attempt['seq']}): ModelError: upstream 503" in table.stdout


def test_audit_exit_codes(db: Path) -> None:
    # A finished run: 0. A crash needing repair: 1. The repaired one: still 1 (a call's
    # outcome is unknown and the crash cut its turn; tests/test_cli_exit_rule.py has the rule).
    assert run_main("audit", "balanced", db=db).returncode == 0
    crashed = run_main("audit", "crashed", "--json", db=db)
    assert crashed.returncode == 1
    assert json.loads(crashed.stdout)["state"] == "needs repair"
    repaired = run_main("audit", "repaired", "--json", db=db)
    assert repaired.returncode == 1
    assert json.loads(repaired.stdout)["state"] == "balanced"


# -- tables at 80 columns ----------------------------------------------------------------------


def test_tables_fit_80_columns_and_never_cut_a_word(failures: Path, db: Path) -> None:
    for args, path in (
        (("audit", "failures"), failures),
        (("audit", "repaired"), db),
        (("sessions",), db),
        (("show", "balanced"), db),
    ):
        result = cli(*args, db=path, COLUMNS="80")
        lines = result.stdout.splitlines()
        # Every line fits, and nothing is cut with an ellipsis inside the tables.
        assert max(len(line) for line in lines) <= 80, result.stdout
        if args[0] != "show":  # show's summaries are clipped on purpose
            assert "…" not in result.stdout
    # Each call id, tool and fate appears whole on one line.
    audit = cli("audit", "repaired", db=db, COLUMNS="80").stdout
    for word in ("call-1-1-0", "call-1-1-1", "call-1-1-2", "recovered", "outcome unknown"):
        assert any(word in line for line in audit.splitlines()), word
    codes = cli("audit", "failures", db=failures, COLUMNS="80").stdout
    assert "INVALID_ARGUMENTS" in codes and "UNKNOWN_TOOL" in codes


# -- show streams ------------------------------------------------------------------------------


def test_show_stops_at_the_limit_with_a_more_hint(db: Path) -> None:
    # At most --limit events, then the command that prints the rest.
    doc = json.loads(cli("show", "balanced", "--json", "--limit", "4", db=db).stdout)
    assert [e["seq"] for e in doc["events"]] == [0, 1, 2, 3]
    assert doc["more"] == "eventlog show balanced --from 4 --limit 4"
    # Following the hint goes on where it stopped; the filters travel with it.
    rest = json.loads(cli("show", "balanced", "--json", "--from", "4", "--all", db=db).stdout)
    assert rest["events"][0]["seq"] == 4 and rest["more"] is None
    text = cli("show", "balanced", "--type", "tool/", "--limit", "2", db=db).stdout
    assert (
        text.rstrip()
        .splitlines()[-1]
        .startswith("more: eventlog show balanced --from 10 --type tool/ --limit 2")
    )


def test_show_prints_the_verified_prefix_of_a_damaged_log(db: Path) -> None:
    result = cli("show", "corrupt", "--json", "--salvage", db=db)
    assert result.returncode == 1
    doc = json.loads(result.stdout)
    assert [e["seq"] for e in doc["events"]] == list(range(CORRUPT_SEQ))
    assert doc["fault"]["seq"] == CORRUPT_SEQ


# -- errors ------------------------------------------------------------------------------------


def test_errors_are_json_on_stderr_under_json(db: Path, tmp_path: Path) -> None:
    # A missing session: exit 2, one JSON object naming the error.
    missing = cli("show", "nope", "--json", db=db)
    assert missing.returncode == 2 and missing.stdout == ""
    assert json.loads(missing.stderr) == {
        "error": {
            "type": "SessionNotFoundError",
            "message": "session 'nope' does not exist",
            "exit": 2,
            "seq": None,
        }
    }
    # A usage error too.
    usage = cli("show", "x", "--from", "-3", "--json")
    assert usage.returncode == 2
    assert json.loads(usage.stderr)["error"]["type"] == "UsageError"
    # A damaged log without --salvage: exit 1, naming the seq.
    damaged = cli("replay", "corrupt", "--json", db=db)
    assert damaged.returncode == 1
    assert json.loads(damaged.stderr)["error"]["seq"] == CORRUPT_SEQ


def test_salvage_reads_the_prefix_of_a_damaged_log(db: Path) -> None:
    refused = cli("replay", "corrupt", db=db)
    assert refused.returncode == 1 and refused.stdout == ""
    assert f"seq {CORRUPT_SEQ}: hash mismatch" in refused.stderr
    salvaged = cli("replay", "corrupt", "--salvage", "--json", db=db)
    assert salvaged.returncode == 1
    assert json.loads(salvaged.stdout)["at"] == CORRUPT_SEQ - 1


def test_verify_all_on_a_damaged_file_is_a_finding(tmp_path: Path) -> None:
    path = tmp_path / "damaged.db"
    path.write_bytes(b"\x00not sqlite at all" * 500)
    result = cli("verify", "--all", db=path)
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith(f"eventlog: error: SQLite database {path}")


# -- running -----------------------------------------------------------------------------------


def test_a_session_whose_writer_is_alive_is_running(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    path = copy_db(shared_runs_db(tmp_path_factory), tmp_path / "runs.db")
    # A real process holds the crashed session open for writing.
    writer = HeldOpen(path, "crashed")
    try:
        rows = json.loads(cli("sessions", "--json", db=path).stdout)["sessions"]
        assert {r["id"]: r["state"] for r in rows}["crashed"] == "running"
        recover = cli("recover", "crashed", db=path)
        assert recover.returncode == 0
        assert "running: a live writer holds the session" in recover.stdout
    finally:
        writer.close()
    # Once the writer is gone the same session needs repair, and recover says so.
    rows = json.loads(cli("sessions", "--json", db=path).stdout)["sessions"]
    assert {r["id"]: r["state"] for r in rows}["crashed"] == "needs repair"
    assert cli("recover", "crashed", db=path).returncode == 1


# -- import --as, a failed import leaves nothing -----------------------------------------------


def test_import_as_and_a_failed_import_leaves_no_file(db: Path, tmp_path: Path) -> None:
    exported = tmp_path / "balanced.jsonl"
    assert cli("export", "balanced", "-o", str(exported), db=db).returncode == 0
    target = tmp_path / "new.db"
    # Imported under a new id, twice under two ids.
    first = cli("import", str(exported), "--as", "copy-1", db=target)
    assert first.returncode == 0, first.stderr
    assert cli("import", str(exported), "--as", "copy-2", db=target).returncode == 0
    ids = [s["id"] for s in json.loads(cli("sessions", "--json", db=target).stdout)["sessions"]]
    assert ids == ["copy-1", "copy-2"]
    assert cli("verify", "copy-2", db=target).returncode == 0
    # A failed import into a file that did not exist leaves no file behind.
    broken = tmp_path / "broken.jsonl"
    broken.write_text(exported.read_text()[:-40])
    fresh = tmp_path / "fresh.db"
    failed = cli("import", str(broken), db=fresh)
    assert failed.returncode == 2
    assert list(tmp_path.glob("fresh.db*")) == []


# -- fork --id, dsh ids ------------------------------------------------------------------------


def test_fork_with_a_chosen_id(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    path = copy_db(shared_runs_db(tmp_path_factory), tmp_path / "runs.db")
    forked = cli("fork", "balanced", "--at", "2", "--id", "what-if", "--json", db=path)
    assert forked.returncode == 0, forked.stderr
    assert json.loads(forked.stdout)["id"] == "what-if"
    assert cli("verify", "what-if", db=path).returncode == 0
    # The id is taken now: a typed error, exit 2, nothing changed.
    again = cli("fork", "balanced", "--at", "2", "--id", "what-if", db=path)
    assert again.returncode == 2 and "what-if" in again.stderr
    ids = [s["id"] for s in json.loads(cli("sessions", "--json", db=path).stdout)["sessions"]]
    assert ids.count("what-if") == 1 and len(ids) == 6


@needs_dsh_logs
def test_dsh_import_keeps_the_harness_id_when_it_is_free(tmp_path: Path) -> None:
    source = (DSH_LOGS / "acp-agent--cancel.jsonl").read_text()
    log = tmp_path / "harness.jsonl"
    log.write_text(source.replace('"id":"{{sessionId}}"', '"id":"harness-1"', 1))
    target = tmp_path / "dsh.db"
    first = json.loads(cli("import", "--from", "dsh", str(log), "--json", db=target).stdout)
    assert first["imported"][0]["session_id"] == "harness-1"
    # Taken the second time: a new id, the first import untouched.
    second = json.loads(cli("import", "--from", "dsh", str(log), "--json", db=target).stdout)
    assert second["imported"][0]["session_id"] not in ("harness-1", "")
    chosen = cli("import", "--from", "dsh", str(log), "--as", "mine", "--json", db=target)
    assert json.loads(chosen.stdout)["imported"][0]["session_id"] == "mine"


def test_repair_records_when_it_ran_and_the_closers_keep_their_time(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    import time

    path = copy_db(shared_runs_db(tmp_path_factory), tmp_path / "runs.db")
    before = time.time_ns() // 1_000_000
    result = cli("recover", "crashed", "--apply", "--json", db=path)
    after = time.time_ns() // 1_000_000
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    # The wall time is in the repair's own record ...
    assert before <= doc["repaired_at"] <= after
    # ... while every closer carries the last event's time, as a deterministic repair must.
    events = json.loads(cli("show", "crashed", "--json", "--all", db=path).stdout)["events"]
    closers = [e for e in events if e["seq"] >= events[0]["seq"] + len(events) - 5]
    last_before = events[-6]["time"]
    assert {e["time"] for e in closers} == {last_before}
    # The text says it too.
    text = cli("recover", "open", "--apply", db=path)
    assert text.returncode == 0
    assert re.search(r"repaired: 1 closer appended and flushed at \d{4}-\d\d-\d\dT", text.stdout)


def test_audit_of_a_run_without_tool_calls_says_so(tmp_path: Path) -> None:
    # The quickstart's session: a user message, no tool call. The table's place says "none"
    # instead of printing headers over no rows.
    from eventlog import APPEND, Message, TurnEnd, TurnStart, UserMessage, open_store

    async def write(url: str) -> None:
        async with open_store(url) as store:
            session = await store.create(session_id="chat")
            session.append("turn/start", TurnStart(turn=1))
            session.append("user/message", UserMessage(message=Message.user("hi")), surface=APPEND)
            session.append("turn/end", TurnEnd(turn=1, reason="completed"))

    path = tmp_path / "sessions.db"
    anyio.run(write, url_of(path))
    result = run_main("audit", "chat", db=path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "tool calls: none\nintegrity: ok, hash chain verified over 3 events\n"
