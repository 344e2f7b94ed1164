"""A log written before payload versions and content parts existed still opens, verifies and
replays identically (``tests/fixtures/make_content_v1.py`` says how the fixture was made)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import msgspec
import pytest

from eventlog import AttachmentNotFoundError, Message, attachment_digest, open_store
from projections import messages, to_anthropic, to_openai
from tests.cli_fixtures import cli

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def old_db(tmp_path: Path) -> Path:
    # A copy: opening for writing records a lease, and the fixture must stay as written.
    return Path(shutil.copy(FIXTURES / "content_v1.db", tmp_path / "content_v1.db"))


def expected_snapshot() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / "content_v1.expected.json").read_text())
    return loaded


def _as_json(value: Any) -> Any:
    # The expectation went through JSON: tuples came back as lists.
    return json.loads(json.dumps(value))


async def test_the_old_log_replays_identically(old_db: Path) -> None:
    expected = expected_snapshot()
    async with open_store(f"sqlite:///{old_db}") as store:
        # Every session of the fixture is there, and nothing else.
        assert sorted(info.id for info in await store.list()) == sorted(expected)
        for session_id, want in expected.items():
            # Open decodes every event and verifies the whole chain.
            session = await store.open(session_id)
            history = list(messages(session))
            assert [event.type for event in await session.events()] == want["types"]
            # What the model sees, and what each provider is sent, is what the old code derived.
            # (The old messages are read with today's message model: a field added since, such
            # as ReasoningPart.id, takes its default.)
            assert history == msgspec.convert(want["messages"], list[Message])
            assert _as_json(to_openai(history)) == want["openai"]
            assert _as_json(to_anthropic(history)) == want["anthropic"]
            await session.aclose()


def test_the_old_log_verifies_with_the_command(old_db: Path) -> None:
    # The `verify` command walks every session's chain and finds nothing.
    done = cli("verify", "--all", db=old_db)
    assert done.returncode == 0, done.stderr
    assert "2 sessions verified, 0 with findings" in done.stdout


async def test_the_old_file_gains_an_attachments_table_only_when_one_is_stored(
    old_db: Path,
) -> None:
    png = b"\x89PNG\r\n\x1a\n"
    async with open_store(f"sqlite:///{old_db}") as store:
        # Before any attachment is stored the file has no table for them, and says so plainly.
        with pytest.raises(AttachmentNotFoundError, match="is not stored"):
            await store.get_attachment(attachment_digest(png))
        assert not _has_table(old_db, "attachments")
        # The first one stored creates it; the old sessions still open and verify.
        digest = await store.put_attachment(png)
        assert await store.get_attachment(digest) == png
        await (await store.open("main")).aclose()
        assert await store.verify_attachments("main") == 0
    assert _has_table(old_db, "attachments")


def _has_table(path: Path, name: str) -> bool:
    with sqlite3.connect(path) as db:
        found = db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone()
    db.close()
    return found is not None
