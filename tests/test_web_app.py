"""The web app of ``eventlog serve`` over the crash tests' database, through Starlette's
TestClient (real HTTP requests into the app), and ``export --format html``."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from starlette.testclient import TestClient

from .cli_fixtures import (
    CORRUPT_SEQ,
    FAILED_CALLS,
    build_runs_db,
    cli,
    cli_types,
    play_failures,
    url_of,
)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # The crash tests' sessions, a fork of the finished one, and a run whose tools all failed.
    path = build_runs_db(tmp_path_factory.mktemp("web") / "runs.db")
    anyio.run(play_failures, url_of(path))
    assert cli("fork", "balanced", "--at", "2", db=path).returncode == 0
    return path


@pytest.fixture(scope="module")
def client(db: Path) -> Iterator[TestClient]:
    from agent.web import create_app

    # The app opens the store at startup and closes it at shutdown (its lifespan).
    # As a browser on this machine asks: Host 127.0.0.1 (any other name is refused).
    app = create_app(url_of(db), types=cli_types())
    with TestClient(app, base_url="http://127.0.0.1:8765") as test_client:
        yield test_client


def bars(page: str) -> list[tuple[str, str]]:
    """(kind, fate) of every timeline bar of a page."""
    return re.findall(r'class="bar [^"]*" data-kind="(\w+)" data-fate="([^"]*)"', page)


def test_sessions_list_filters_by_state_and_metadata(client: TestClient) -> None:
    # Every session, with its state.
    page = client.get("/")
    assert page.status_code == 200
    rows = re.findall(r'<tr data-state="([^"]+)">\s*<td><a href="/s/([^"]+)"', page.text)
    found = {sid: state for state, sid in rows}
    assert {k: found[k] for k in ("balanced", "crashed", "open", "corrupt", "failures")} == {
        "balanced": "balanced",
        "crashed": "needs repair",
        "open": "needs repair",
        "corrupt": "corrupt",
        "failures": "balanced",
    }
    # By state: the crashed one and the one cut between steps need repair.
    crashed = client.get("/", params={"state": "needs repair"}).text
    assert re.findall(r'<a href="/s/([^"]+)"', crashed) == ["crashed", "open"]
    # By metadata.
    by_meta = client.get("/", params={"meta": "run=balanced"}).text
    matched = re.findall(r'<a href="/s/([^"]+)"', by_meta)
    assert "balanced" in matched and "crashed" not in matched and "failures" not in matched


def test_session_page_draws_every_fate_with_its_seqs(client: TestClient) -> None:
    # The crashed session: an open turn, a recovered-to-be, an outcome-unknown, a not-started.
    crashed = client.get("/s/crashed").text
    drawn = bars(crashed)
    assert ("turn", "open") in drawn and ("tool", "outcome unknown") in drawn
    assert ("tool", "not started") in drawn
    assert 'class="bar fate-outcome-unknown"' in crashed
    # The repaired one: the interrupted turn and the recovered call.
    repaired = bars(client.get("/s/repaired").text)
    assert ("turn", "interrupted") in repaired and ("tool", "recovered") in repaired
    # The failing tools: each error with its code, in the table and on its bar.
    failures = client.get("/s/failures").text
    for code in FAILED_CALLS.values():
        assert f"error {code}" in failures
        assert f"· {code}" in failures
    assert ("model", "error") in bars(failures)  # the failed attempt
    assert "upstream 503" in failures
    # Parallel calls stand side by side in commit order (call seq).
    rows = re.findall(r'data-call-id="([^"]+)" data-fate="error"', failures)
    assert rows == ["call-2-0", "call-2-1", "call-2-2", "call-2-3"]


def test_integrity_and_lineage(client: TestClient, db: Path) -> None:
    # A damaged log names its first bad seq.
    corrupt = client.get("/s/corrupt").text
    assert f'<strong id="damaged-seq">{CORRUPT_SEQ}</strong>' in corrupt
    ok = client.get("/s/balanced").text
    assert "hash chain verified over" in ok
    # The fork is linked both ways.
    child = next(
        s["id"]
        for s in json.loads(cli("sessions", "--json", db=db).stdout)["sessions"]
        if s["parent_id"] == "balanced"
    )
    assert f'<a href="/s/{child}">{child}</a> (after seq 2)' in ok
    assert (
        'forked from <a href="/s/balanced">balanced</a> after seq 2'
        in client.get(f"/s/{child}").text
    )


def test_what_the_model_saw_beside_the_header_diff(client: TestClient) -> None:
    page = client.get("/s/failures/seen", params={"at": 16})
    assert page.status_code == 200
    # The tool results the model saw, and the header in force (unchanged since the last one).
    assert "over quota" in page.text and "role-tool" in page.text
    assert "vs the request after seq" in page.text
    first = client.get("/s/failures/seen", params={"at": 5}).text  # after the first header
    assert "(first request)" in first and 'class="changed"' in first
    assert client.get("/s/failures/seen", params={"at": 999}).status_code == 400


def test_raw_events_paged_and_filtered(client: TestClient) -> None:
    page = client.get("/s/balanced/events", params={"limit": 5}).text
    assert re.findall(r'<td class="num">(\d+)</td>', page) == ["0", "1", "2", "3", "4"]
    assert 'rel="next" href="?from=5&limit=5' in page
    tools = client.get("/s/balanced/events", params={"type": "tool/", "limit": 100}).text
    assert set(re.findall(r"<code>([a-z/]+)</code>", tools)) == {
        "tool/call",
        "tool/outcome",
        "tool/result",
    }


def test_missing_session_and_bad_parameters(client: TestClient) -> None:
    assert client.get("/s/nope").status_code == 404
    assert "does not exist" in client.get("/s/nope").text
    assert client.get("/s/balanced/events", params={"from": "x"}).status_code == 400


def test_export_html_is_one_self_contained_file(db: Path, tmp_path: Path) -> None:
    target = tmp_path / "crashed.html"
    result = cli("export", "crashed", "--format", "html", "-o", str(target), db=db)
    assert result.returncode == 0, result.stderr
    page = target.read_text()
    # The page's parts are in the file, and nothing outside it is referenced.
    assert 'class="bar fate-outcome-unknown"' in page and "What the model saw last" in page
    assert "<style>" in page and "<script" not in page
    assert re.findall(r'(?:src|href)="(?:https?:)?//', page) == []
    assert re.findall(r"url\(", page) == []
    assert re.findall(r'href="/', page) == []  # no link into a server the file does not have
    # A damaged log: the page shows what comes before the damage, and the command exits 1.
    damaged = tmp_path / "corrupt.html"
    result = cli("export", "corrupt", "--format", "html", "-o", str(damaged), db=db)
    assert result.returncode == 1 and f"seq {CORRUPT_SEQ}: hash mismatch" in result.stderr
    assert f'<strong id="damaged-seq">{CORRUPT_SEQ}</strong>' in damaged.read_text()


def test_serve_binds_loopback_and_answers(db: Path) -> None:
    # The real command: uvicorn on a free loopback port, stopped with SIGINT.
    server = subprocess.Popen(
        [sys.executable, "-m", "eventlog", "--db", url_of(db), "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        match = re.match(r"serving (http://127\.0\.0\.1:\d+/) \(read-only", line)
        assert match, line
        reply = httpx2.get(match[1] + "s/crashed", timeout=30)
        assert reply.status_code == 200 and "outcome unknown" in reply.text
        # A page elsewhere that rebinds its name to this address is refused.
        foreign = httpx2.get(match[1], headers={"host": "rebind.example:80"}, timeout=30)
        assert foreign.status_code == 400 and "crashed" not in foreign.text
        assert foreign.headers["x-frame-options"] == "DENY"
    finally:
        server.send_signal(signal.SIGINT)
        _, err = server.communicate(timeout=30)
    assert server.returncode == 0, err


def test_a_long_session_is_drawn_a_page_of_turns_at_a_time(tmp_path: Path) -> None:
    from agent.web import create_app
    from eventlog import TurnEnd, TurnStart, open_store

    async def fill(url: str) -> None:
        async with open_store(url) as store:
            session = await store.create("long")
            for turn in range(1, 121):
                session.append("turn/start", TurnStart(turn=turn))
                session.append("turn/end", TurnEnd(turn=turn, reason="completed"))
            await session.aclose()

    url = url_of(tmp_path / "long.db")
    anyio.run(fill, url)
    with TestClient(create_app(url), base_url="http://localhost") as client:
        # The latest 50 turns by default, with the way to the earlier ones.
        latest = client.get("/s/long").text
        assert re.findall(r'<div class="label" title="(turn \d+)"', latest)[0] == "turn 71"
        assert "turns 71–120 of 120" in latest and 'href="?turn=21"' in latest
        # From a given turn.
        first = client.get("/s/long", params={"turn": 1}).text
        labels = re.findall(r'<div class="label" title="(turn \d+)"', first)
        assert labels[0] == "turn 1" and labels[-1] == "turn 50" and len(labels) == 50
        assert 'rel="next" href="?turn=51"' in first


def test_the_live_stream_of_a_log_that_cannot_be_followed_ends_saying_why(
    client: TestClient,
) -> None:
    # Following the damaged session meets the damage: the stream sends an `end` event naming
    # it and closes, instead of dropping the connection mid-stream (a browser logged
    # ERR_INCOMPLETE_CHUNKED_ENCODING, and its EventSource reconnected to meet it again).
    with client.stream("GET", "/s/corrupt/live", params={"after": 1}) as reply:
        assert reply.status_code == 200
        text = "".join(reply.iter_text())
    assert "event: end" in text
    assert f"seq {CORRUPT_SEQ}" in text.split("event: end", 1)[1]
