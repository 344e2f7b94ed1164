"""Export then import is lossless: a property over generated runs (crashed, repaired, with an
app extension event), plus DeepSeek Harness logs brought in with ``import --from dsh``.

The property calls :func:`agent.cli.main` in-process (a subprocess per example would be slow);
the subprocess tests elsewhere cover the command line itself.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import anyio
import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.cli import main
from eventlog import open_store
from projections import messages
from recovery import repair
from recovery.testing import AgentRun, agent_runs

from .cli_fixtures import Note, cli, cli_types, run_main, url_of
from .conftest import SOAK
from .dsh_logs import DSH_LOGS, needs_dsh_logs


async def _write(url: str, run: AgentRun, stop: int, note: bool, repaired: bool) -> None:
    async with open_store(url, types=cli_types()) as store:
        session = await store.create("run", metadata={"origin": "property", "n": stop})
        await run.play(session, stop)
        if note:
            session.append("app/note", Note(text="an extension the command does not know"))
        if repaired:
            await repair(session)
        await session.aclose()


async def _snapshot(url: str, session_id: str) -> tuple[Any, list[Any], list[Any]]:
    """Everything stored about a session (record and every column of every row) and the
    messages derived from it, as the command sees it (core types only)."""
    async with open_store(url) as store:
        record = await store.backend.get_session(session_id)
        rows = [
            row async for chunk in store.backend.read_rows(session_id, 0, None) for row in chunk
        ]
        session = await store.open(session_id, salvage=True)
        derived = [msgspec.to_builtins(m) for m in messages(session)]
        assert session.head == record.head  # verified to the end
    return record, rows, derived


@settings(max_examples=200 if SOAK else 10)
@given(
    run=agent_runs(max_turns=2),
    cut=st.floats(min_value=0, max_value=1),
    note=st.booleans(),
    repaired=st.booleans(),
)
def test_export_then_import_is_lossless(
    run: AgentRun, cut: float, note: bool, repaired: bool
) -> None:
    stop = round(cut * len(run))  # a crash after any event
    with tempfile.TemporaryDirectory() as tmp:
        source, target = url_of(Path(tmp) / "a.db"), url_of(Path(tmp) / "b.db")
        exported = str(Path(tmp) / "run.jsonl")
        anyio.run(_write, source, run, stop, note, repaired)
        assert main(["--db", source, "export", "run", "-o", exported]) == 0
        assert main(["--db", target, "import", exported]) == 0
        assert main(["--db", target, "verify", "run"]) == 0
        assert anyio.run(_snapshot, target, "run") == anyio.run(_snapshot, source, "run")


@needs_dsh_logs
def test_dsh_logs_import_and_round_trip(tmp_path: Path) -> None:
    # A log with plugin-owned types, kept as ignorable dsh/* extension events.
    name = "acp-agent--advanced-toolchain.jsonl"
    first, second = tmp_path / "dsh.db", tmp_path / "again.db"
    result = cli("import", "--from", "dsh", str(DSH_LOGS / name), "--json", db=first)
    assert result.returncode == 0, result.stderr
    (report,) = json.loads(result.stdout)["imported"]
    assert report["file"] == str(DSH_LOGS / name) and report["extensions"] > 0
    sid = report["session_id"]
    exported = tmp_path / "export.jsonl"
    assert run_main("export", sid, "-o", str(exported), db=first).returncode == 0
    assert run_main("import", str(exported), db=second).returncode == 0
    assert run_main("verify", sid, db=second).returncode == 0
    assert anyio.run(_snapshot, url_of(second), sid) == anyio.run(_snapshot, url_of(first), sid)
    replay = ("replay", sid, "--json")
    assert run_main(*replay, db=second).stdout == run_main(*replay, db=first).stdout


def test_dsh_import_of_a_malformed_log_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    result = cli("import", "--from", "dsh", str(bad), db=tmp_path / "x.db")
    assert result.returncode == 2
    assert result.stderr.startswith(f"eventlog: error: {bad}")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
