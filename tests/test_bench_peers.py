"""The peers benchmark harness: its always-available peers and its report (no timings asserted).

The optional peers (eventsourcing, openai-agents, LangGraph) need the ``bench`` extra and are
exercised by ``python -m benchmarks peers --quick``; here the floor and eventlog's two rows run
on a real SQLite file, and the report is checked on figures made up for the purpose.
"""

from __future__ import annotations

import importlib.util
import json
import sqlite3
from pathlib import Path

import pytest

from benchmarks.peers._common import EVENTS_PER_TURN, Concurrent, Peer, database_bytes
from benchmarks.peers._report import Meta, Outcome, PeerInfo, report
from benchmarks.peers.eventlog_peer import EventlogBackground, EventlogFlushPerTurn
from benchmarks.peers.raw_sqlite import RawSQLite

PEERS = [RawSQLite(), EventlogFlushPerTurn(), EventlogBackground()]


@pytest.mark.parametrize("peer", PEERS, ids=lambda p: p.name)
def test_peer_writes_durably_and_reloads(peer: Peer, tmp_path: Path) -> None:
    path = tmp_path / "bench.db"
    result = peer.write(path, 3)
    assert result.settings["journal_mode"] == "wal"
    assert result.settings["synchronous"] == "2"  # FULL
    assert database_bytes(path) > 0
    timing = peer.reload(path, result.session_id)
    assert timing.wall > 0


def test_raw_rows_are_the_workload(tmp_path: Path) -> None:
    path = tmp_path / "raw.db"
    result = RawSQLite().write(path, 2)
    with sqlite3.connect(path) as connection:
        rows = connection.execute(
            "SELECT seq, type FROM events WHERE session_id = ? ORDER BY seq", (result.session_id,)
        ).fetchall()
    assert [seq for seq, _ in rows] == list(range(2 * EVENTS_PER_TURN))
    assert rows[0][1] == "turn/start" and rows[-1][1] == "turn/end"


@pytest.mark.parametrize("peer", PEERS, ids=lambda p: p.name)
def test_concurrent_sessions_all_land(peer: Concurrent, tmp_path: Path) -> None:
    path = tmp_path / "concurrent.db"
    peer.write_concurrent(path, 3, 2)
    with sqlite3.connect(path) as connection:
        sessions, rows = connection.execute(
            "SELECT count(DISTINCT session_id), count(*) FROM events"
        ).fetchone()
    assert (sessions, rows) == (3, 3 * 2 * EVENTS_PER_TURN)


def _meta() -> Meta:
    return Meta(
        date="2026-01-01 00:00 UTC",
        machine="x86_64 test",
        cpus=2,
        python="3.11",
        sqlite="3.40.1",
        platform="Linux",
        filesystem="ext4 (/dev/test)",
        quick=True,
        lengths=[(1_000, 1)],
        seconds=1.0,
        load_average=(0.5, 0.5),
    )


def test_report_prints_verdicts_and_writes_json_and_chart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    peers = [
        PeerInfo("raw sqlite3", "sqlite3", "3.40.1", "WAL", "nothing", False),
        PeerInfo("eventlog (flush per turn)", "eventlog", "0.1.0", "WAL", "all", True),
        PeerInfo("openai-agents SQLiteSession", "openai-agents", "1", "WAL", "nothing", False),
        PeerInfo("langgraph SqliteSaver", "langgraph", "1", "WAL", "message fields", True),
        PeerInfo.missing("eventsourcing", "not installed: No module named 'eventsourcing'"),
    ]
    outcomes = [
        Outcome("raw sqlite3", 1_000, events_per_s=[900.0, 1_000.0, 1_100.0]),
        Outcome(
            "eventlog (flush per turn)",
            1_000,
            events_per_s=[3_000.0],
            reload_s=[0.1],
            reload_cpu_s=[0.05],
        ),
        Outcome("openai-agents SQLiteSession", 1_000, events_per_s=[1_500.0], reload_s=[0.2]),
        Outcome(
            "langgraph SqliteSaver", 1_000, reload_s=[0.08], reload_cpu_s=[0.04], note="seeded"
        ),
        Outcome("eventsourcing", 1_000, error="not installed: No module named 'eventsourcing'"),
    ]
    report(_meta(), peers, outcomes, tmp_path)
    printed = capsys.readouterr().out
    expected = [
        "verdict throughput @T=1,000: eventlog flush-per-turn is 2.00× the best peer "
        "(openai-agents SQLiteSession); target ≥1.5× MET",
        "verdict reload @T=1,000: eventlog 100.0 ms (CPU 50.0) vs validating peers: "
        "langgraph SqliteSaver 80.0 ms (CPU 40.0); below every one: wall NOT MET, CPU NOT MET",
    ]
    for line in expected:
        assert line in printed
    assert "not installed: No module named 'eventsourcing'" in printed
    document = json.loads((tmp_path / "peers-quick.json").read_text())
    assert document["verdicts"] == expected
    ours = next(r for r in document["results"] if r["peer"] == "eventlog (flush per turn)")
    assert ours["ratio_to_raw"] == 3.0
    assert "| eventsourcing | — | not installed" in (tmp_path / "peers-quick.md").read_text()
    has_matplotlib = importlib.util.find_spec("matplotlib") is not None
    assert (tmp_path / "peers-quick.png").exists() == has_matplotlib
