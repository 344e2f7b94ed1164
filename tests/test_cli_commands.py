"""The ``eventlog`` command, run as a subprocess against a real SQLite file of generated runs.

The file (see :mod:`tests.cli_fixtures`) holds ``balanced`` (a finished run with a compaction
and an app extension event), ``crashed`` (cut inside a step with a recovered, an
outcome-unknown and a not-started call), ``repaired`` (the same cut, repaired), ``open`` (a
turn just started) and ``corrupt`` (one stored byte changed).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from eventlog import Replace, open_store
from projections import messages, to_openai

from .cli_fixtures import CORRUPT_SEQ, CRASH_STOP, cli, run_main, shared_runs_db, the_run, url_of


@pytest.fixture
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_runs_db(tmp_path_factory)  # read-only here


def as_json(result: Any) -> Any:
    assert result.stderr == "" or "warning" in result.stderr, result.stderr
    return json.loads(result.stdout)


def test_the_fixture_run_has_what_the_tests_rely_on() -> None:
    run = the_run()
    types = [e.type for e in run.events]
    assert types.count("turn/start") == 2
    assert any(isinstance(e.surface, Replace) for e in run.events)  # a compaction
    assert len(run) > CRASH_STOP


# -- sessions ----------------------------------------------------------------------------------


def test_sessions_lists_every_state(db: Path) -> None:
    result = cli("sessions", "--json", db=db)
    assert result.returncode == 1  # one is corrupt, two need repair
    rows = {row["id"]: row for row in as_json(result)["sessions"]}
    assert {sid: row["state"] for sid, row in rows.items()} == {
        "balanced": "balanced",
        "corrupt": "corrupt",
        "crashed": "needs repair",
        "open": "needs repair",
        "repaired": "balanced",
    }
    assert rows["balanced"]["events"] == len(the_run()) + 1  # + the app/note
    assert rows["balanced"]["turns"] == 2
    assert rows["crashed"]["events"] == CRASH_STOP
    assert rows["repaired"]["events"] == CRASH_STOP + 5  # 3 results, step/end, turn/end
    assert rows["corrupt"]["error"]["seq"] == CORRUPT_SEQ
    assert set(rows["open"]) == {
        "id",
        "created_at",
        "events",
        "turns",
        "last_time",
        "state",
        "parent_id",
        "fork_seq",
        "metadata",
        "error",
    }
    assert rows["balanced"]["metadata"] == {"run": "balanced"}


def test_sessions_table_is_plain_text_when_piped(db: Path) -> None:
    result = cli("sessions", db=db)
    assert result.returncode == 1
    assert "\x1b[" not in result.stdout  # colour only on a terminal
    for needle in ("balanced", "needs repair", "corrupt", "last activity"):
        assert needle in result.stdout
    assert f"session 'corrupt', seq {CORRUPT_SEQ}: hash mismatch" in result.stderr


def test_colour_when_forced_as_on_a_terminal(db: Path) -> None:
    result = cli("sessions", db=db, FORCE_COLOR="1")
    assert "\x1b[32mbalanced\x1b[0m" in result.stdout


def test_sessions_pages(db: Path) -> None:
    first = as_json(run_main("sessions", "--json", "--limit", "2", db=db))
    assert [s["id"] for s in first["sessions"]] == ["balanced", "corrupt"]
    assert first["next_after"] == "corrupt"
    rest = as_json(run_main("sessions", "--json", "--after", "corrupt", db=db))
    assert [s["id"] for s in rest["sessions"]] == ["crashed", "open", "repaired"]
    assert rest["next_after"] is None


# -- show --------------------------------------------------------------------------------------


def test_show_filters_by_type_turn_and_seq(db: Path) -> None:
    run = the_run()
    tools = as_json(cli("show", "balanced", "--json", "--type", "tool/", db=db))
    assert tools["session"] == "balanced"
    assert [e["type"] for e in tools["events"]] == [
        e.type for e in run.events if e.type.startswith("tool/")
    ]
    second = as_json(run_main("show", "balanced", "--json", "--turn", "2", db=db))["events"]
    starts = [e["seq"] for e in second if e["type"] == "turn/start"]
    assert len(starts) == 1 and second[0]["type"] == "turn/start"
    assert second[-1]["type"] == "turn/end" and second[-1]["data"]["turn"] == 2
    window = as_json(run_main("show", "balanced", "--json", "--from", "3", "--to", "5", db=db))
    assert [e["seq"] for e in window["events"]] == [3, 4, 5]
    assert set(window["events"][0]) == {
        "seq",
        "type",
        "time",
        "surface",
        "sources",
        "ignorable",
        "data",
        "version",
    }


def test_show_prints_an_unknown_extension_event_with_its_raw_data(db: Path) -> None:
    result = cli("show", "balanced", "--type", "app/note", db=db)
    assert result.returncode == 0
    assert "app/note" in result.stdout and "reviewed by the auditor" in result.stdout
    note = as_json(run_main("show", "balanced", "--json", "--type", "app", db=db))["events"]
    assert note[0]["ignorable"] is True
    assert note[0]["data"] == {"text": "reviewed by the auditor"}


def test_show_of_a_corrupt_session_shows_the_good_prefix_and_exits_1(db: Path) -> None:
    result = cli("show", "corrupt", "--json", db=db)
    assert result.returncode == 1
    doc = json.loads(result.stdout)
    assert [e["seq"] for e in doc["events"]] == list(range(CORRUPT_SEQ))
    assert doc["fault"]["seq"] == CORRUPT_SEQ
    assert f"session 'corrupt', seq {CORRUPT_SEQ}: hash mismatch" in result.stderr


# -- replay ------------------------------------------------------------------------------------


async def _expected_openai(db: Path, session_id: str, at: int | None) -> list[Any]:
    async with open_store(url_of(db)) as store:
        session = await store.open(session_id, salvage=True)
        return list(to_openai(list(messages(session, at=at))))


def test_replay_gives_the_messages_the_model_saw(db: Path) -> None:
    for at in (None, 12):
        args = ["replay", "balanced", "--format", "openai"] + (["--at", str(at)] if at else [])
        doc = as_json((cli if at is None else run_main)(*args, db=db))
        expected = anyio.run(_expected_openai, db, "balanced", at)
        assert doc["messages"][0] == {"role": "system", "content": "Be brief."}
        assert doc["messages"][1:] == json.loads(json.dumps(expected))
        assert doc["tools"][0]["type"] == "function"
    anthropic = as_json(run_main("replay", "balanced", "--format", "anthropic", db=db))
    assert anthropic["system"] == "Be brief." and anthropic["messages"]
    neutral = as_json(run_main("replay", "balanced", "--json", "--at", "5", db=db))
    assert neutral["at"] == 5
    assert [m["role"] for m in neutral["messages"]] == ["user"]


def test_replay_text(db: Path) -> None:
    result = cli("replay", "repaired", db=db)
    assert result.returncode == 0
    assert "session repaired after seq" in result.stdout
    assert "never started" in result.stdout  # the recovery text the model sees


def test_replay_at_a_seq_outside_the_log_is_an_input_error(db: Path) -> None:
    # Past the end: the message names the seqs there are (no "-1": it is not one of them).
    result = run_main("replay", "open", "--at", "99", db=db)
    assert result.returncode == 2
    assert result.stderr == (
        "eventlog: error: --at 99: session 'open' has events 0..3; SEQ is one of them\n"
    )
    # Salvaged, the seqs there are end before the damage, and the message says so.
    salvaged = run_main("replay", "corrupt", "--salvage", "--at", "99", db=db)
    assert salvaged.returncode == 2
    assert salvaged.stderr == (
        f"eventlog: error: --at 99: session 'corrupt' has events 0..{CORRUPT_SEQ - 1} (read "
        "before the damage); SEQ is one of them\n"
    )
    # Negative: refused by the argument itself, in either spelling.
    for words in (["--at", "-1"], ["--at=-1"]):
        refused = cli("replay", "open", *words, db=db)
        assert refused.returncode == 2
        assert "argument --at: expected 0 or more, got -1" in refused.stderr


# -- audit -------------------------------------------------------------------------------------


def test_audit_classes_every_call_with_proving_seqs(db: Path) -> None:
    crashed = as_json(cli("audit", "crashed", "--json", db=db))
    assert crashed["open_turn"] == 1 and crashed["open_step"] == 1
    assert crashed["integrity"] == {"ok": True, "fault": None, "findings": []}
    repaired = as_json(run_main("audit", "repaired", "--json", db=db))
    before = {c["call_id"]: c for c in crashed["calls"]}
    after = {c["call_id"]: c for c in repaired["calls"]}
    assert before.keys() == after.keys()
    # Unanswered at the crash, each call is classed as repair then answers it.
    expected = {"completed": "recovered", "outcome unknown": "outcome unknown"}
    changed = {cid for cid in before if before[cid]["seqs"]["result"] is None}
    assert len(changed) == 3
    assert {after[cid]["outcome"] for cid in changed} == {
        "recovered",
        "outcome unknown",
        "not started",
    }
    for cid in changed:
        assert after[cid]["outcome"] == expected.get(before[cid]["outcome"], "not started")
        assert after[cid]["state"] == "resulted"
        assert after[cid]["seqs"]["result"] >= CRASH_STOP
        assert after[cid]["seqs"]["proposed"] == before[cid]["seqs"]["proposed"]
    sample = next(iter(after.values()))
    assert set(sample) == {
        "turn",
        "step",
        "call_id",
        "name",
        "arguments",
        "state",
        "outcome",
        "error",
        "seqs",
        "approval",
    }
    assert sample["approval"] is None  # no call of this run asked for a decision
    assert set(sample["seqs"]) == {
        "proposed",
        "requested",
        "decided",
        "call",
        "outcome",
        "result",
    }


def test_audit_table_and_integrity_line(db: Path) -> None:
    result = cli("audit", "repaired", db=db)
    assert result.returncode == 1  # repaired, but a call's outcome is unknown: a finding
    assert "outcome unknown" in result.stdout and "not started" in result.stdout
    assert f"integrity: ok, hash chain verified over {CRASH_STOP + 5} events" in result.stdout


def test_audit_of_a_corrupt_session_exits_1(db: Path) -> None:
    result = cli("audit", "corrupt", "--json", "--salvage", db=db)
    assert result.returncode == 1
    integrity = json.loads(result.stdout)["integrity"]
    assert integrity["ok"] is False and integrity["fault"]["seq"] == CORRUPT_SEQ


# -- verify ------------------------------------------------------------------------------------


def test_verify_one_session(db: Path) -> None:
    good = cli("verify", "balanced", db=db)
    assert good.returncode == 0
    assert good.stdout.startswith("ok    balanced  ")
    bad = cli("verify", "corrupt", db=db)
    assert bad.returncode == 1
    assert bad.stdout == (
        f"FAIL  corrupt  session 'corrupt', seq {CORRUPT_SEQ}: hash mismatch, the stored event "
        "was altered or damaged (hint: open with salvage=True to read the events before it)\n"
    )


def test_verify_all(db: Path) -> None:
    result = cli("verify", "--all", "--json", db=db)
    assert result.returncode == 1
    doc = json.loads(result.stdout)
    assert doc["ok"] is False
    verdicts = {s["id"]: s["ok"] for s in doc["sessions"]}
    assert verdicts == {
        "balanced": True,
        "corrupt": False,
        "crashed": True,
        "open": True,
        "repaired": True,
    }
    text = run_main("verify", "--all", db=db)
    assert text.stdout.endswith("5 sessions verified, 1 with findings\n")


def test_verify_needs_one_of_id_or_all(db: Path) -> None:
    result = cli("verify", db=db)
    assert result.returncode == 2
    assert result.stderr == "eventlog: error: verify needs a session ID or --all (not both)\n"


# -- recover -----------------------------------------------------------------------------------


def test_recover_diagnoses_without_writing(db: Path) -> None:
    result = cli("recover", "crashed", "--json", db=db)
    assert result.returncode == 1  # a finding: repair is needed
    doc = json.loads(result.stdout)
    assert doc["needs_repair"] is True and doc["applied"] is False
    assert sorted(d["kind"] for d in doc["dangling"]) == [
        "not-started",
        "outcome-unknown",
        "recovered",
    ]
    text = run_main("recover", "crashed", db=db)
    assert "needs repair: run `eventlog recover crashed --apply`" in text.stdout
    again = as_json(run_main("sessions", "--json", db=db))
    assert {s["id"]: s["events"] for s in again["sessions"]}["crashed"] == CRASH_STOP


def test_recover_repaired_session_has_nothing_to_do(db: Path) -> None:
    result = cli("recover", "repaired", db=db)
    assert result.returncode == 0
    assert result.stdout.endswith("nothing to repair\n")
