"""Logs written by hash-chain format 1 keep opening, verifying and replaying identically.

``tests/fixtures/format1.db`` was written by the code of format 1 (see
``tests/fixtures/make_format1.py``); it is never regenerated. Every test works on a copy.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import msgspec
import pytest

from eventlog import open_store
from tests.cli_fixtures import run_main
from tests.fixtures.make_format1 import fixture_types

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def format1(tmp_path: Path) -> Path:
    # A copy: opening a database may write to it (WAL, leases), the fixture must stay as made.
    return Path(shutil.copy(FIXTURES / "format1.db", tmp_path / "format1.db"))


def _with_todays_defaults(event: object) -> object:
    assert isinstance(event, dict)
    info = fixture_types().get(event["type"])
    if info is None or event.get("ignorable"):
        return event
    data = msgspec.json.decode(msgspec.json.encode(msgspec.convert(event["data"], info.payload)))
    return {**event, "data": data}


def _expected() -> dict[str, list[object]]:
    replay: dict[str, list[object]] = json.loads((FIXTURES / "format1.events.json").read_bytes())
    return replay


async def test_every_format1_session_opens_and_replays_identically(format1: Path) -> None:
    expected = _expected()
    async with open_store(f"sqlite:///{format1}", types=fixture_types()) as store:
        # The same sessions as when the file was made ...
        assert sorted(i.id for i in await store.list()) == sorted(expected)
        for session_id, events in expected.items():
            # ... each opens for writing (decode, verify the format-1 chain, rebuild) ...
            session = await store.open(session_id)
            replayed = msgspec.json.decode(
                msgspec.json.encode([msgspec.to_builtins(e) for e in await session.events()])
            )
            # ... and replays exactly the events that were written (read with today's payload
            # classes, so a field added since with its default is there on both sides).
            assert replayed == [_with_todays_defaults(e) for e in events], session_id
            await session.aclose()


def test_eventlog_verify_passes_on_the_format1_file(format1: Path) -> None:
    # The command, with its default registry (it skips the ignorable app type).
    result = run_main("verify", "--all", db=format1)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 sessions verified, 0 with findings" in result.stdout
