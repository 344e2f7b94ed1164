"""Attachments over their whole life on every store: a damaged one is repaired by putting (or
importing) the right bytes, never by wrong ones; deleting a session removes the bytes no other
session references; every argument of the attachments API is type-checked."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from eventlog import (
    APPEND,
    AttachmentNotFoundError,
    CorruptLogError,
    FilePart,
    ImagePart,
    Message,
    MessageSource,
    UserMessage,
    ValidationError,
    attachment_digest,
    open_store,
)
from eventlog.stores import LogStore, MemoryBackend
from tests.cli_fixtures import cli
from tests.pg_children.server import raw_connection, store_url
from tests.test_store_hardening import Place, _make_place

pytestmark = pytest.mark.anyio

CHILD = Path(__file__).parent / "sqlite_children" / "shows_image.py"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
SCREEN = b"\x89PNG\r\n\x1a\n" + bytes(range(64, 200))


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    with _make_place(request.param, tmp_path) as made:
        yield made


_USER = MessageSource(kind="user")


def show(session: Any, *digests: str) -> None:
    """Append a user message showing the images ``digests``."""
    parts = tuple(ImagePart(media_type="image/png", attachment=d) for d in digests)
    message = Message(id=f"m{session.head + 1}", role="user", content=parts, source=_USER)
    session.append("user/message", UserMessage(message=message), surface=APPEND)


async def _side_sql(place: Place, sql: str, *args: Any) -> list[Any]:
    """Run ``sql`` (``?`` placeholders) on the raw tables of a SQL store; its rows."""
    if place.path is not None:
        with sqlite3.connect(place.path) as db:
            rows = db.execute(sql, args).fetchall()
        db.close()
        return rows
    assert place.schema is not None
    conn = await raw_connection()
    try:
        await conn.execute(f'SET search_path = "{place.schema}"')
        numbered = sql
        for number in range(1, len(args) + 1):
            numbered = numbered.replace("?", f"${number}", 1)
        return list(await conn.fetch(numbered, *args))
    finally:
        await conn.close()


async def damage(place: Place, store: LogStore, digest: str, bad: bytes) -> None:
    """Overwrite the stored bytes of ``digest`` behind the store's back."""
    if isinstance(store.backend, MemoryBackend):
        store.backend.data.attachments[digest] = bad
    else:
        await _side_sql(place, "UPDATE attachments SET data = ? WHERE digest = ?", bad, digest)


async def stored(place: Place, store: LogStore) -> set[str]:
    """The digests whose bytes are stored (side door: the raw table)."""
    if isinstance(store.backend, MemoryBackend):
        return set(store.backend.data.attachments)
    return {row[0] for row in await _side_sql(place, "SELECT digest FROM attachments")}


# -- repair ------------------------------------------------------------------------------------


async def test_putting_the_right_bytes_repairs_a_damaged_attachment(place: Place) -> None:
    async with place.store() as store:
        digest = await store.put_attachment(PNG)
        session = await store.create(session_id="s")
        show(session, digest)
        await session.flush()
        # The stored bytes are damaged: every read says so.
        await damage(place, store, digest, b"not a png")
        with pytest.raises(CorruptLogError, match=f"attachment {digest} was altered"):
            await store.get_attachment(digest)
        # Bytes that do not hash to the digest never replace anything, damaged or not.
        await store.backend.put_attachment(digest, b"also wrong")
        with pytest.raises(CorruptLogError):
            await store.get_attachment(digest)
        # The right bytes, put again, replace the damaged ones.
        assert await store.put_attachment(PNG) == digest
        assert await store.get_attachment(digest) == PNG
        assert await store.verify_attachments("s") == 1
        # And good bytes are never replaced by bad ones.
        await store.backend.put_attachment(digest, b"wrong again")
        assert await store.get_attachment(digest) == PNG
        await session.aclose()


async def _sessions_of_one_image(path: Path, *ids: str) -> None:
    async with open_store(f"sqlite:///{path}") as store:
        digest = await store.put_attachment(PNG)
        for sid in ids:
            session = await store.create(session_id=sid)
            show(session, digest)
            await session.aclose()


def test_importing_a_good_export_repairs_a_damaged_attachment(tmp_path: Path) -> None:
    source, target = tmp_path / "source.db", tmp_path / "target.db"
    anyio.run(_sessions_of_one_image, source, "exported")
    exported = tmp_path / "one.jsonl"
    assert cli("export", "exported", "-o", str(exported), db=source).returncode == 0
    # The target holds "other", whose image bytes were damaged.
    anyio.run(_sessions_of_one_image, target, "other")
    with sqlite3.connect(target) as db:
        db.execute("UPDATE attachments SET data = ?", (b"damaged",))
    db.close()
    assert cli("verify", "other", db=target).returncode == 1
    # Importing the export (which carries the good bytes) repairs them for every session.
    done = cli("import", str(exported), db=target)
    assert done.returncode == 0, done.stderr
    assert cli("verify", "other", db=target).returncode == 0
    assert cli("verify", "exported", db=target).returncode == 0


def test_importing_a_backup_of_the_same_session_repairs_its_attachment(tmp_path: Path) -> None:
    # The usual backup case: the session is in the store, its image bytes got damaged, and the
    # backup export of that very session is imported back into the same store.
    store_file = tmp_path / "sessions.db"
    anyio.run(_sessions_of_one_image, store_file, "kept")
    backup = tmp_path / "backup.jsonl"
    assert cli("export", "kept", "-o", str(backup), db=store_file).returncode == 0
    with sqlite3.connect(store_file) as db:
        db.execute("UPDATE attachments SET data = ?", (b"damaged",))
    db.close()
    assert cli("verify", "kept", db=store_file).returncode == 1
    # The events are there already, identical: only the damaged bytes are put back.
    done = cli("import", str(backup), db=store_file)
    assert done.returncode == 0, done.stderr
    assert "session kept is in the store already, identical" in done.stdout
    assert "1 damaged or missing attachment restored" in done.stdout
    assert cli("verify", "kept", db=store_file).returncode == 0
    # Again: nothing left to restore.
    assert (
        "0 damaged or missing attachments restored"
        in cli("import", str(backup), db=store_file).stdout
    )


# -- delete ------------------------------------------------------------------------------------


async def test_deleting_a_session_removes_the_bytes_only_it_referenced(place: Place) -> None:
    async with place.store() as store:
        png, screen = await store.put_attachment(PNG), await store.put_attachment(SCREEN)
        loose = await store.put_attachment(b"referenced by no event")
        # "a" shows both images; "b" shows the screen; "a"'s fork shows both.
        a = await store.create(session_id="a")
        show(a, png, screen)
        await a.aclose()
        b = await store.create(session_id="b")
        show(b, screen)
        await b.aclose()
        fork = await store.fork("a", 0, child_id="fork")
        await fork.aclose()
        # Deleting "a" keeps everything: the fork still shows both.
        await store.delete("a")
        assert await stored(place, store) == {png, screen, loose}
        # Deleting the fork removes the image no one else shows; "b"'s screen stays.
        await store.delete("fork")
        assert await stored(place, store) == {screen, loose}
        with pytest.raises(AttachmentNotFoundError):
            await store.get_attachment(png)
        assert await store.verify_attachments("b") == 1
        # The last session showing the screen goes, and its bytes with it. Bytes put but never
        # referenced belong to no session: no delete removes them.
        await store.delete("b")
        assert await stored(place, store) == {loose}


async def test_a_reference_stored_by_another_store_before_the_delete_keeps_the_bytes(
    place: Place,
) -> None:
    async with place.store() as first, place.store() as second:
        digest = await first.put_attachment(PNG)
        mine = await first.create(session_id="mine")
        show(mine, digest)
        await mine.aclose()
        # Another store (another process, for SQLite and PostgreSQL) stores a reference to
        # the same bytes; then the first session is deleted: the bytes stay.
        theirs = await second.create(session_id="theirs")
        assert await second.put_attachment(PNG) == digest
        show(theirs, digest)
        await theirs.flush()
        await first.delete("mine")
        assert await second.get_attachment(digest) == PNG
        # A reference stored only after the delete finds the bytes gone (the documented
        # limit); putting them again repairs it.
        late = await second.create(session_id="late")
        await theirs.aclose()
        await first.delete("theirs")
        show(late, digest)
        await late.flush()
        with pytest.raises(AttachmentNotFoundError, match="seq 0"):
            await second.verify_attachments("late")
        await second.put_attachment(PNG)
        assert await second.verify_attachments("late") == 1
        await late.aclose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def sql_place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    with _make_place(request.param, tmp_path) as made:
        yield made


async def test_a_session_of_another_process_keeps_the_bytes_it_shows(sql_place: Place) -> None:
    place = sql_place
    url = f"sqlite:///{place.path}" if place.path is not None else store_url(str(place.schema))
    async with place.store() as store:
        digest = await store.put_attachment(PNG)
        mine = await store.create(session_id="mine")
        show(mine, digest)
        await mine.aclose()
        # Another process puts the same bytes and stores a session showing them ...
        command = [sys.executable, str(CHILD), url, "theirs", PNG.hex()]
        async with await anyio.open_process(command, stdin=subprocess.PIPE) as child:
            assert child.stdout is not None and child.stdin is not None
            line = b""
            while not line.endswith(b"\n"):
                line += await child.stdout.receive(1)
            assert line == b"stored\n"
            # ... so deleting this one, while that process still runs, keeps the bytes.
            await store.delete("mine")
            assert await store.get_attachment(digest) == PNG
            await child.stdin.aclose()
            assert await child.wait() == 0
        assert await store.verify_attachments("theirs") == 1
        # Once no session shows them, the delete takes them.
        await store.delete("theirs")
        assert await stored(place, store) == set()


# -- type traps --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda s: s.put_attachment("x"),
            "put_attachment: data must be bytes (or a bytearray or memoryview), got str",
        ),
        (lambda s: s.put_attachment(None), "got NoneType"),
        (lambda s: s.put_attachment([1, 2]), "got list"),
        (lambda s: s.get_attachment(5), "attachment digest must be 'sha256:' and 64 lowercase"),
        (lambda s: s.get_attachment("sha256:XYZ"), "got str 'sha256:XYZ'"),
        (lambda s: s.load_attachments("abc"), "messages must be an iterable of Message, got str"),
        (lambda s: s.load_attachments(Message.user("hi")), "got Message"),
        (lambda s: s.load_attachments([Message.user("hi"), 3]), "item 1 must be a Message"),
        (lambda s: s.load_attachments(7), "got int"),
        (lambda s: s.verify_attachments(7), "session id"),
    ],
)
async def test_every_attachment_call_refuses_a_wrong_type(call: Any, message: str) -> None:
    backend = MemoryBackend()
    async with LogStore(backend) as store:
        with pytest.raises(ValidationError) as caught:
            await call(store)
        assert message in str(caught.value)
    # Nothing was stored.
    assert backend.data.attachments == {}


async def test_bytes_like_attachments_are_stored_as_bytes() -> None:
    async with open_store("memory:") as store:
        digests = {
            await store.put_attachment(PNG),
            await store.put_attachment(bytearray(PNG)),
            await store.put_attachment(memoryview(PNG)),
        }
        assert digests == {attachment_digest(PNG)}
        assert type(await store.get_attachment(attachment_digest(PNG))) is bytes


@pytest.fixture
def pg_place(tmp_path: Path) -> Iterator[Place]:
    with _make_place("postgres", tmp_path) as made:
        yield made


@pytest.mark.postgres
async def test_a_postgres_delete_waits_for_a_round_in_flight_that_references_the_bytes(
    pg_place: Place,
) -> None:
    place = pg_place
    assert place.schema is not None
    async with place.store() as store:
        digest = await store.put_attachment(PNG)
        mine = await store.create(session_id="mine")
        show(mine, digest)
        await mine.aclose()
        await (await store.create(session_id="theirs")).aclose()
        # Another host's write round is in flight: its row references the same bytes,
        # its transaction not yet committed.
        writer = await raw_connection()
        waiter = await raw_connection()
        try:
            await writer.execute(f'SET search_path = "{place.schema}"')
            in_flight = writer.transaction()
            await in_flight.start()
            await writer.execute(
                "INSERT INTO events VALUES ('theirs', 0, 'user/message', 0, NULL, '[]', "
                "false, $1, '\\x00')",
                f'{{"message":{{"attachment":"{digest}"}}}}',
            )
            # The delete starts and waits for that round (it holds write rounds back while
            # it looks) ...
            async with anyio.create_task_group() as tg:
                tg.start_soon(store.delete, "mine")
                await _until_waiting_on_a_lock(waiter, place.schema)
                # ... which commits: the delete then sees the reference, and keeps the bytes.
                await in_flight.commit()
        finally:
            await writer.close()
            await waiter.close()
        assert await store.get_attachment(digest) == PNG
        assert await stored(place, store) == {digest}


async def _until_waiting_on_a_lock(conn: Any, schema: str) -> None:
    """Return once a statement locking ``schema``'s events table waits for a lock."""
    query = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1"
    with anyio.fail_after(10):
        while not await conn.fetchval(query, f'LOCK TABLE "{schema}".events%'):
            await anyio.sleep(0.01)  # a condition on another server session: polled


def wrong(value: object) -> Any:
    """``value``, typed so a call with the wrong type type-checks (the point of the test)."""
    return value


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: attachment_digest(wrong("x")), "attachment_digest: data must be bytes"),
        (
            lambda: ImagePart(media_type="image/png", attachment=wrong(5)),
            "ImagePart.attachment must be str, got int",
        ),
        (
            lambda: FilePart(media_type="a/b", attachment=wrong(b"sha256:")),
            "FilePart.attachment must be str, got bytes",
        ),
        (
            lambda: FilePart(media_type="a/b", data=wrong("text")),
            "FilePart.data must be bytes, got str",
        ),
        (
            lambda: ImagePart(media_type=wrong(None), url="https://x"),
            "ImagePart.media_type must be str, got NoneType",
        ),
    ],
)
def test_building_a_reference_of_the_wrong_type_is_a_validation_error(
    build: Any, message: str
) -> None:
    with pytest.raises(ValidationError, match=re.escape(message)):
        build()
