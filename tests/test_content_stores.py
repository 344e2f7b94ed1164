"""Every content part through every store and back, then through every converter; forks and
``export``/``import`` carry the attachments."""

from __future__ import annotations

import gc
import os
import sqlite3
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from eventlog import (
    APPEND,
    AssistantMessage,
    FilePart,
    ImagePart,
    Message,
    MessageSource,
    ReasoningPart,
    RedactedReasoningPart,
    Session,
    StepEnd,
    StepStart,
    StoreWriteError,
    TextPart,
    ToolCall,
    ToolCallPart,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
    attachment_digest,
    open_store,
)
from eventlog.stores import MemoryData
from projections import messages, to_anthropic, to_openai, to_openai_responses
from recovery.testing import FaultyStore, SimulatedCrash
from tests.cli_fixtures import cli
from tests.pg_children.server import fresh_schema, store_url

pytestmark = pytest.mark.anyio

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
SCREEN = b"\x89PNG\r\n\x1a\n" + bytes(range(64, 200))


def _history(png: str, screen: str) -> list[Message]:
    """One message of each kind, holding every part there is."""
    return [
        Message(
            id="u1",
            role="user",
            content=(
                TextPart(text="what is on my screen?"),
                ImagePart(media_type="image/png", attachment=png),
                ImagePart(media_type="image/jpeg", url="https://example.com/a.jpg"),
                FilePart(media_type="application/pdf", data=b"%PDF-1.7", filename="spec.pdf"),
                FilePart(media_type="text/plain", attachment=png, filename="notes.txt"),
            ),
            source=MessageSource(kind="user", request_id="r1"),
        ),
        Message(
            id="a1",
            role="assistant",
            content=(
                ReasoningPart(text="need a screenshot", signature="sig", id="rs_1"),
                RedactedReasoningPart(data="ZW5jcnlwdGVk"),
                TextPart(text="Let me look."),
                ToolCallPart(id="c1", name="screenshot", arguments="{}"),
            ),
            source=MessageSource(kind="model"),
        ),
        Message.tool_result(
            "c1",
            (TextPart(text="the screen:"), ImagePart(media_type="image/png", attachment=screen)),
            id="t1",
        ),
    ]


def _write(session: Session, history: list[Message]) -> None:
    user, assistant, result = history
    session.append("turn/start", TurnStart(turn=1))
    session.append("user/message", UserMessage(message=user), surface=APPEND)
    session.append("step/start", StepStart(turn=1, step=1))
    session.append(
        "assistant/message",
        AssistantMessage(turn=1, step=1, message=assistant, finish="tool-calls"),
        surface=APPEND,
    )
    session.append(
        "tool/call", ToolCall(turn=1, step=1, call_id="c1", name="screenshot", arguments="{}")
    )
    session.append("tool/result", ToolResult(turn=1, step=1, message=result), surface=APPEND)
    session.append("step/end", StepEnd(turn=1, step=1))
    session.append("turn/end", TurnEnd(turn=1, reason="completed"))


def _converted(history: list[Message], attachments: dict[str, bytes]) -> list[Any]:
    return [
        to_openai(history, attachments=attachments, degrade="text"),
        to_anthropic(history, attachments=attachments, degrade="text"),
        to_openai_responses(history, attachments=attachments),
    ]


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "memory":
        yield "memory:"
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'content.db'}"
    else:
        with fresh_schema() as schema:
            yield store_url(schema)


async def test_every_part_round_trips_through_the_store_and_the_converters(url: str) -> None:
    data = MemoryData()  # the memory store's "disk", shared by both stores below
    options: dict[str, Any] = {"data": data} if url == "memory:" else {}
    async with open_store(url, **options) as store:
        # The bytes go in once; the events reference them by digest.
        png, screen = await store.put_attachment(PNG), await store.put_attachment(SCREEN)
        history = _history(png, screen)
        session = await store.create(session_id="content")
        _write(session, history)
        before = _converted(history, {png: PNG, screen: SCREEN})
        await session.flush()
        await session.aclose()
    async with open_store(url, **options) as store:
        # After a restart: the same model-visible history, part for part ...
        session = await store.open("content")
        again = list(messages(session))
        assert again == history
        # ... the same bytes behind every reference, and the same provider requests.
        loaded = await store.load_attachments(again)
        assert loaded == {png: PNG, screen: SCREEN}
        assert _converted(again, loaded) == before
        assert await store.verify_attachments("content") == 2
        # A fork sees the same history and reads the same attachments.
        child = await store.fork("content", boundary=session.head)
        assert list(messages(child)) == history
        assert await store.load_attachments(messages(child)) == loaded
        await child.aclose()
        await session.aclose()


async def _sqlite_with_history(path: Path) -> None:
    """A SQLite file holding the history of :func:`_history` and its two attachments."""
    async with open_store(f"sqlite:///{path}") as store:
        png, screen = await store.put_attachment(PNG), await store.put_attachment(SCREEN)
        session = await store.create(session_id="content")
        _write(session, _history(png, screen))
        await session.aclose()


def test_export_and_import_carry_the_attachments(tmp_path: Path) -> None:
    source, target = tmp_path / "source.db", tmp_path / "target.db"
    anyio.run(_sqlite_with_history, source)
    # Export writes the events, then one line per attachment they reference.
    exported = tmp_path / "content.jsonl"
    done = cli("export", "content", "-o", str(exported), db=source)
    assert done.returncode == 0, done.stderr
    lines = exported.read_text().splitlines()
    assert sum('"kind":"attachment"' in line for line in lines) == 2
    # Import into another store: the history and its attachments arrive together.
    done = cli("import", str(exported), db=target)
    assert done.returncode == 0, done.stderr

    async def read() -> None:
        async with open_store(f"sqlite:///{target}") as store:
            session = await store.open("content")
            history = list(messages(session))
            assert history == _history(attachment_digest(PNG), attachment_digest(SCREEN))
            assert set((await store.load_attachments(history)).values()) == {PNG, SCREEN}
            await session.aclose()

    anyio.run(read)
    # An attachment altered in the file is refused, naming the line and the digest.
    tampered = tmp_path / "tampered.jsonl"
    altered = lines[-1].replace('"data_b64":"i', '"data_b64":"j')  # PNG base64 opens "iVBOR"
    assert altered != lines[-1]
    tampered.write_text("\n".join([*lines[:-1], altered]) + "\n")
    done = cli("import", str(tampered), db=tmp_path / "third.db")
    assert done.returncode != 0
    assert f"tampered.jsonl:{len(lines)}: attachment sha256:" in done.stderr
    assert "the file was altered" in done.stderr


def test_the_verify_command_finds_a_changed_attachment_naming_the_event(tmp_path: Path) -> None:
    path = tmp_path / "content.db"
    anyio.run(_sqlite_with_history, path)
    assert cli("verify", "content", db=path).returncode == 0
    # Side door: change one byte of the screenshot the tool result (seq 5) shows.
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE attachments SET data = ? WHERE digest = ?",
            (SCREEN[:-1] + b"\x00", attachment_digest(SCREEN)),
        )
    db.close()
    done = cli("verify", "content", db=path)
    assert done.returncode == 1
    assert f"seq 5: attachment {attachment_digest(SCREEN)} was altered" in done.stdout


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def disk_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The stores whose attachments live outside the process (the memory store holds them)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'content.db'}"
    else:
        with fresh_schema() as schema:
            yield store_url(schema)


async def test_open_does_not_read_attachment_bytes(disk_url: str) -> None:
    big = os.urandom(8 * 2**20)
    async with open_store(disk_url) as store:
        digest = await store.put_attachment(big)
        session = await store.create(session_id="big")
        _write(session, _history(digest, digest))
        await session.aclose()
    async with open_store(disk_url) as store:
        # Python's allocations while opening stay far below the 8 MiB the events reference.
        gc.collect()
        tracemalloc.start()
        try:
            session = await store.open("big")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 2**20, f"open allocated {peak:,} bytes"
        # Reading them is what loads them.
        assert await store.load_attachments(messages(session)) == {digest: big}
        await session.aclose()


async def test_a_crashed_faulty_store_stores_no_more_attachments() -> None:
    data = MemoryData()
    async with FaultyStore(open_store("memory:", data=data), crash_at=0) as store:
        # Before the crash an attachment is stored (it is not a group-commit round) ...
        digest = await store.put_attachment(PNG)
        session = await store.create(session_id="s")
        session.append("turn/start", TurnStart(turn=1))
        with pytest.raises(StoreWriteError, match="simulated crash before the write"):
            await session.flush()
        # ... after it, nothing more is.
        with pytest.raises(SimulatedCrash, match="the store crashed at write 0"):
            await store.put_attachment(SCREEN)
        assert await store.get_attachment(digest) == PNG
    assert set(data.attachments) == {digest}
