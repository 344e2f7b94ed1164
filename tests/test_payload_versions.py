"""Payload versions: an upcaster applied on read, the chain over the stored bytes, a newer
version refused with a message saying so, and the version shown by the command."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import msgspec
import pytest

from eventlog import (
    CorruptLogError,
    EventTypes,
    Message,
    UnsupportedFormatError,
    UserMessage,
    ValidationError,
    open_store,
)
from eventlog.stores import stored_version
from projections import messages
from tests.cli_fixtures import cli
from tests.test_content_fixture import FIXTURES, expected_snapshot

pytestmark = pytest.mark.anyio


class NoteV1(msgspec.Struct, frozen=True, kw_only=True):
    text: str


class NoteV2(msgspec.Struct, frozen=True, kw_only=True):
    """Version 2 split ``text`` into a title and a body."""

    title: str
    body: str = ""


def _v1_to_v2(old: dict[str, Any]) -> dict[str, Any]:
    title, _, body = old["text"].partition("\n")
    return {"title": title, "body": body}


def types_v1() -> EventTypes:
    types = EventTypes()
    types.register("app/note", NoteV1, ignorable=True)
    return types


def types_v2() -> EventTypes:
    types = types_v1()
    assert types.register_version("app/note", NoteV2, upcast=_v1_to_v2) == 2
    return types


def stored_data(path: Path, seq: int) -> bytes:
    """Side door: the stored bytes of one event."""
    with sqlite3.connect(path) as db:
        (data,) = db.execute(
            "SELECT CAST(data AS BLOB) FROM events WHERE seq = ?", (seq,)
        ).fetchone()
    db.close()
    return bytes(data)


async def test_old_events_are_upcast_on_read_and_the_chain_still_verifies(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'notes.db'}"
    # Code of version 1 writes two notes.
    async with open_store(url, types=types_v1()) as store:
        session = await store.create(session_id="n")
        session.append("app/note", NoteV1(text="groceries\nmilk, eggs"))
        session.append("app/note", NoteV1(text="call mum"))
        await session.flush()
        await session.aclose()
    before = [stored_data(tmp_path / "notes.db", seq) for seq in (0, 1)]
    assert [stored_version(data) for data in before] == [1, 1]
    # Code of version 2 opens the log: the old events read as the new type, the chain verifies.
    async with open_store(url, types=types_v2()) as store:
        session = await store.open("n")
        assert [e.data for e in await session.events()] == [
            NoteV2(title="groceries", body="milk, eggs"),
            NoteV2(title="call mum"),
        ]
        # A new event is written as version 2, with its version first in the stored JSON.
        session.append("app/note", NoteV2(title="dentist", body="tuesday"))
        await session.flush()
        await session.aclose()
    new = stored_data(tmp_path / "notes.db", 2)
    assert new == b'{"_v":2,"title":"dentist","body":"tuesday"}'
    # Upcasting never rewrote the stored bytes, and the mixed log reopens and reads alike.
    assert [stored_data(tmp_path / "notes.db", seq) for seq in (0, 1)] == before
    async with open_store(url, types=types_v2()) as store:
        events = [event async for event in store.read("n")]
        assert [e.data.title for e in events] == ["groceries", "call mum", "dentist"]
        await (await store.open("n")).aclose()


async def test_a_newer_version_is_refused_saying_so(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'notes.db'}"
    async with open_store(url, types=types_v2()) as store:
        session = await store.create(session_id="n")
        session.append("app/note", NoteV2(title="from the future"))
        await session.flush()
        await session.aclose()
    # Code that knows only version 1 refuses the event rather than misreading it.
    async with open_store(url, types=types_v1()) as store:
        with pytest.raises(
            UnsupportedFormatError,
            match=r"session 'n', seq 0: event type 'app/note' was written as version 2, "
            r"newer than version 1 registered here",
        ):
            await store.open("n")
        with pytest.raises(UnsupportedFormatError, match="written as version 2"):
            [event async for event in store.read("n")]


async def test_a_failing_upcaster_is_a_corrupt_event_naming_the_seq() -> None:
    broken = types_v1()
    broken.register_version("app/note", NoteV2, upcast=lambda old: old["missing"])
    async with open_store("memory:", types=types_v1()) as store:
        session = await store.create(session_id="n")
        session.append("app/note", NoteV1(text="x"))
        await session.flush()
        await session.aclose()
        data = store.backend.data  # type: ignore[attr-defined]
    async with open_store("memory:", types=broken, data=data) as store:
        with pytest.raises(
            CorruptLogError, match=r"seq 0: .*upcaster from version 1 to 2 failed: KeyError"
        ):
            await store.open("n")


def test_registering_a_version_needs_the_previous_one_and_an_object_payload() -> None:
    types = EventTypes()
    with pytest.raises(ValidationError, match="'app/note' is not registered"):
        types.register_version("app/note", NoteV2, upcast=_v1_to_v2)
    types.register("app/note", NoteV1)

    class Reserved(msgspec.Struct, frozen=True):
        _v: int

    class Packed(msgspec.Struct, frozen=True, array_like=True):
        text: str

    with pytest.raises(ValidationError, match="field name '_v' is reserved"):
        types.register_version("app/note", Reserved, upcast=_v1_to_v2)
    with pytest.raises(ValidationError, match="encoded as a JSON object"):
        types.register_version("app/note", Packed, upcast=_v1_to_v2)
    # Versions chain: each takes an upcaster from the one before it.
    assert types.register_version("app/note", NoteV2, upcast=_v1_to_v2) == 2
    assert types.register_version("app/note", NoteV2, upcast=lambda old: old) == 3


async def test_the_command_shows_the_stored_version(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    async with open_store(f"sqlite:///{path}", types=types_v1()) as store:
        session = await store.create(session_id="n")
        session.append("app/note", NoteV1(text="old"))
        await session.flush()
        await session.aclose()
    async with open_store(f"sqlite:///{path}", types=types_v2()) as store:
        session = await store.open("n")
        session.append("app/note", NoteV2(title="new"))
        await session.flush()
        await session.aclose()
    # The command does not know the app's type (it shows the raw event) but says the version.
    done = cli("show", "n", "--json", db=path)
    assert done.returncode == 0, done.stderr
    shown = msgspec.json.decode(done.stdout)
    assert [(e["seq"], e["version"]) for e in shown["events"]] == [(0, 1), (1, 2)]
    table = cli("show", "n", db=path, COLUMNS="200")
    assert "app/note (v2)" in table.stdout


class UserMessageV2(UserMessage, frozen=True, kw_only=True):
    """A core type's next version: the message and the channel it came in on."""

    channel: str


async def test_a_core_type_can_take_a_version_and_the_old_fixture_upcasts(tmp_path: Path) -> None:
    types = EventTypes()
    types.register_version(
        "user/message", UserMessageV2, upcast=lambda old: {**old, "channel": "chat"}
    )
    db = Path(shutil.copy(FIXTURES / "content_v1.db", tmp_path / "old.db"))
    async with open_store(f"sqlite:///{db}", types=types) as store:
        session = await store.open("main")
        # Every old user/message reads as version 2; the rest of the log is as it was.
        users = [e.data for e in await session.events() if e.type == "user/message"]
        assert users and all(isinstance(u, UserMessageV2) and u.channel == "chat" for u in users)
        want = expected_snapshot()["main"]["messages"]
        assert list(messages(session)) == msgspec.convert(want, list[Message])
        await session.aclose()
