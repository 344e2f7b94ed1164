"""A live-writer differential: a real writer process appends and flushes a session without pause
(SQLite and PostgreSQL) while this process reads it every way there is, the library's open modes
and every read-only command. A healthy live session is never reported damaged: not by
``open(salvage=True)``, not by ``verify``, ``sessions``, ``show``, ``audit``, ``replay`` or
``recover`` (without ``--apply``); the opens that need the writer lease are refused with
``SessionBusyError``, which is not damage either.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from agent.report import describe_session, describe_sessions, load_session
from agent.web._views import session_view
from eventlog import SessionBusyError, SessionInfo, open_store
from eventlog.stores import GENESIS_HASH, LogStore, verify_rows
from recovery import scan
from tests.cli_fixtures import run_main
from tests.pg_children.server import fresh_schema, store_url

#: Rounds of reading; each waits for the writer to have flushed again since the last.
ROUNDS = 2
SID = "live"


class LiveWriter:
    """The writer child (``tests/live_children/writer.py``); its stdout is drained on a thread
    so it never blocks on a full pipe, and every ``flushed N`` line is a condition to wait on."""

    def __init__(self, url: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.live_children.writer", url, SID],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).parent.parent,
        )
        self.durable = -1
        self.flushes = 0
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._changed:
                self.durable = int(line.removeprefix("flushed "))
                self.flushes += 1
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for_flushes(self, count: int) -> None:
        """Wait until the writer has flushed ``count`` times in all."""
        with self._changed:
            done = self._changed.wait_for(
                lambda: self.flushes >= count or self.process.poll() is not None, timeout=60
            )
        assert done and self.process.poll() is None, self._died()

    def _died(self) -> str:
        assert self.process.stderr is not None
        self.process.kill()
        return f"the writer ended ({self.process.wait()}): {self.process.stderr.read()}"

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        self._thread.join(timeout=10)
        assert self.process.stdout is not None and self.process.stderr is not None
        self.process.stdout.close()
        self.process.stderr.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def live_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'live.db'}"
    else:
        with fresh_schema() as schema:
            yield store_url(schema)


def _options(url: str) -> dict[str, float]:
    return {"lease_ttl": 5.0} if url.startswith("postgres") else {}


async def _library_round(url: str, floor: int) -> dict[str, int]:
    """Every way the library reads a live session, each asserted healthy; returns what was seen."""
    async with open_store(url, **_options(url)) as store:
        # A read-only open: the whole log, no fault, at least what was flushed before.
        salvaged = await store.open(SID, salvage=True)
        assert salvaged.salvage_fault is None, salvaged.salvage_fault
        assert salvaged.head >= floor
        assert scan(salvaged).findings == ()
        # The opens that take the lease are refused: a live writer holds it.
        for options in ({}, {"verify": "snapshot"}, {"verify": "full"}, {"wait": 0.01}):
            with pytest.raises(SessionBusyError):
                await store.open(SID, **options)
        # The report's loader (the command and the web app) and the sessions row.
        loaded = await load_session(store, SID)
        assert (loaded.fault, loaded.unknown) == (None, None)
        record = await store.record(SID)
        row = await describe_session(store, SessionInfo(id=SID, created_at=0, head=record.head))
        assert (row["state"], row["error"]) == ("running", None), row
        # The web app's session page: healthy, every event it verified counted.
        page = await session_view(store, SID)
        assert (page["state"], page["fault"]) == ("running", None)
        assert page["stored"] == page["head"] + 1 == page["count"]
        # The raw rows verify as a chain; follow yields the next event once it is flushed.
        count = await _verified_rows(store)
        assert count >= salvaged.head + 1
        followed = -1
        async for event in store.follow(SID, after=count - 1):
            followed = event.seq
            break
        assert followed == count
        return {"salvaged": salvaged.head, "rows": count, "followed": followed}


async def _verified_rows(store: LogStore) -> int:
    previous, count = GENESIS_HASH, 0
    async for chunk in store.read_rows(SID, 0, None):
        previous = verify_rows(list(chunk), previous, count, session_id=SID)
        count += len(chunk)
    return count


def _commands_round(url: str, out: Path) -> None:
    """Every read-only command on the live session: each exits 0 and reports no damage."""
    for args in (
        ["export", SID, "-o", str(out / "live.jsonl")],
        ["export", SID, "--format", "html", "-o", str(out / "live.html")],
        ["verify", SID],
        ["verify", "--all"],
        ["show", SID, "--all"],
        ["audit", SID],
        ["replay", SID],
        ["replay", SID, "--format", "openai"],
        ["recover", SID],
    ):
        done = run_main(*args, db=url)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
    listed = run_main("--json", "sessions", db=url)
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)["sessions"]
    assert (row["state"], row["error"]) == ("running", None), row
    verified = run_main("--json", "verify", SID, db=url)
    (checked,) = json.loads(verified.stdout)["sessions"]
    assert checked["ok"] is True, verified.stdout
    # The writer's snapshots (one every few events) were checked against the log too.
    assert checked["snapshot"] is not None


def test_a_live_session_read_every_way_is_never_reported_damaged(
    live_url: str, tmp_path: Path
) -> None:
    # A writer process starts writing; the readers start once it has flushed a few times.
    writer = LiveWriter(live_url)
    try:
        writer.wait_for_flushes(6)
        for _ in range(ROUNDS):
            flushes, floor = writer.flushes, writer.durable
            # The library's reads, then every read-only command, all while it writes.
            seen = anyio.run(_library_round, live_url, floor)
            _commands_round(live_url, tmp_path)
            # The writer really wrote meanwhile: the reads raced live appends (follow waited
            # for an event flushed after the round began).
            assert seen["followed"] > floor
            writer.wait_for_flushes(flushes + 2)
    finally:
        writer.kill()


def test_a_session_deleted_while_verify_all_runs_is_gone_not_damaged(tmp_path: Path) -> None:
    # verify --all lists the sessions, then checks each: one deleted in between (here: listed
    # before it was deleted) is reported gone, and is not a finding.
    from agent.cli._commands.verify import _verify_one

    url = f"sqlite:///{tmp_path / 'gone.db'}"

    async def scenario() -> dict[str, object]:
        async with open_store(url) as store:
            session = await store.create(session_id=SID)
            await session.aclose()
            (info,) = await store.list()
            await store.delete(SID)
            return await _verify_one(store, info)

    result = anyio.run(scenario)
    assert (result["ok"], result["fault"], result.get("deleted")) == (True, None, True)


def test_a_session_deleted_while_sessions_lists_is_gone_not_corrupt(tmp_path: Path) -> None:
    # The listing's rows are described after the page was listed: one deleted in between is
    # left out, never shown as corrupt; the others are described as usual.
    url = f"sqlite:///{tmp_path / 'gone.db'}"

    async def scenario() -> list[dict[str, object]]:
        async with open_store(url) as store:
            for sid in ("a-kept", "b-gone"):
                session = await store.create(session_id=sid)
                await session.aclose()
            infos = await store.list()
            await store.delete("b-gone")
            return await describe_sessions(store, infos)

    rows = anyio.run(scenario)
    assert [(row["id"], row["state"], row["error"]) for row in rows] == [
        ("a-kept", "balanced", None)
    ]
