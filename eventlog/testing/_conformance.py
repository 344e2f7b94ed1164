"""The store conformance suite: one contract, every store.

Subclass :class:`StoreConformance` in a test module (the base class name does not start with
``Test`` so pytest collects only subclasses) and implement three hooks::

    class TestMyStore(StoreConformance):
        @pytest.fixture(autouse=True)
        def _location(self, tmp_path: Path) -> None:
            self.path = tmp_path / "sessions.db"

        def make_store(self, **options: Any) -> LogStore:
            return open_store(f"sqlite:///{self.path}", **options)

        async def tamper_event(self, session_id: str, seq: int) -> None:
            ...  # side door: the stored data becomes flip_a_letter(data)

        async def tamper_attachment(self, digest: str) -> None:
            ...  # side door: flip one byte of a stored attachment

``make_store`` returns a new, not yet entered store over the same stored data each time it is
called, so a test can close one and open another to act out a restart.
"""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest

from .._errors import (
    AttachmentNotFoundError,
    ClosedError,
    ConflictError,
    CorruptLogError,
    EventNotLoadedError,
    SessionBusyError,
    SessionExistsError,
    SessionNotFoundError,
    StoreWriteError,
    UnsupportedFormatError,
    ValidationError,
)
from .._event import APPEND, Event, Replace, Unknown
from .._message import FilePart, ImagePart, Message, TextPart, attachment_digest
from .._registry import EventTypes
from .._session import Session
from .._vocabulary import StepEnd, StepStart, TurnEnd, TurnStart, UserMessage
from ..stores import LogStore

__all__ = ("StoreConformance", "flip_a_letter", "lease_refusals")


class _Note(msgspec.Struct, frozen=True, kw_only=True):
    text: str


def _user(session: Session, text: str) -> Event:
    return session.append("user/message", UserMessage(message=Message.user(text)), surface=APPEND)


def _turn(session: Session, turn: int, text: str = "hello") -> None:
    session.append("turn/start", TurnStart(turn=turn))
    _user(session, text)
    session.append("step/start", StepStart(turn=turn, step=1))
    session.append("step/end", StepEnd(turn=turn, step=1))
    session.append("turn/end", TurnEnd(turn=turn, reason="completed"))


def _plant_unstorable_time(session: Session) -> None:
    """Commit a valid event, then swap its queued copy for one whose ``time`` no store column
    holds (2**63): a row that got past the commit-time checks (a side door into the writer)."""
    event = session.append("turn/start", TurnStart(turn=1))
    queued = session._tail.queued  # type: ignore[attr-defined]
    assert queued[-1][0] is event
    queued[-1] = (msgspec.structs.replace(event, time=2**63), queued[-1][1])


async def _texts(store: LogStore, session_id: str) -> list[str]:
    """The user texts stored in a session, read without the lease."""
    return [e.data.message.text async for e in store.read(session_id) if e.type == "user/message"]


def _same(a: list[Event], b: list[Event]) -> None:
    assert [msgspec.to_builtins(e) for e in a] == [msgspec.to_builtins(e) for e in b]


def lease_refusals(store: LogStore) -> anyio.Event:
    """An event set the first time ``store`` is refused a writer lease (``SessionBusyError``:
    a live writer holds it), so a test can tell that a waiting ``open(wait=...)`` really
    waited before it lets the holder go (:meth:`LogStore.watch_lease_refusals`)."""
    return store.watch_lease_refusals()


def flip_a_letter(data: bytes) -> bytes:
    """``data`` (a stored event's JSON) with the case of the first letter of its first
    ``"text"`` value flipped: still valid JSON that decodes to the same payload, a different
    text, so only the hash chain can tell. (A flipped quote or brace fails as invalid JSON
    instead, and a test would pass even with the chain unchecked.)

    :raises ValueError: ``data`` has no ``"text"`` value starting with a letter.
    """
    at = data.find(b'"text":"') + len(b'"text":"')
    if at < len(b'"text":"') or not data[at : at + 1].isalpha():
        raise ValueError("no text value starting with a letter to flip")
    flipped = data[:at] + bytes([data[at] ^ 0x20]) + data[at + 1 :]
    msgspec.json.decode(flipped)  # still valid JSON
    return flipped


@pytest.mark.anyio
class StoreConformance:
    """The contract of :class:`~eventlog.Store`, run against one store.

    Subclass it under a name starting with ``Test`` and give it the three hooks below; pytest
    (with anyio's plugin, which anyio installs) runs every test against your store. The memory
    store's subclass, whole::

        class TestMyStore(StoreConformance):
            @pytest.fixture(autouse=True)
            def _data(self) -> None:
                self.data = MemoryData()

            def make_store(self, **options: Any) -> LogStore:
                return open_store("memory:", data=self.data, **options)

            async def tamper_event(self, session_id: str, seq: int) -> None:
                rows = self.data.rows[session_id]
                rows[seq] = msgspec.structs.replace(rows[seq], data=flip_a_letter(rows[seq].data))

            async def tamper_attachment(self, digest: str) -> None:
                data = bytearray(self.data.attachments[digest])
                data[len(data) // 2] ^= 0x01
                self.data.attachments[digest] = bytes(data)
    """

    def make_store(self, **options: Any) -> LogStore:
        """A new, not yet entered store over this test's stored data."""
        raise NotImplementedError

    async def tamper_event(self, session_id: str, seq: int) -> None:
        """Flip one byte of the stored data of event ``seq`` (a side door to the raw rows)."""
        raise NotImplementedError

    # -- create and open -----------------------------------------------------------------------

    async def tamper_attachment(self, digest: str) -> None:
        """Flip one byte of the stored bytes of attachment ``digest`` (a side door)."""
        raise NotImplementedError

    async def test_create_gives_an_empty_writable_session(self) -> None:
        async with self.make_store() as store:
            session = await store.create(session_id="s-1", metadata={"app": "demo"})
            assert (session.id, session.head, session.durable) == ("s-1", -1, -1)
            assert session.metadata == {"app": "demo"}
            assert repr(session) == "<Session 's-1' head=-1 durable=-1>"

    async def test_create_refuses_a_taken_or_malformed_id(self) -> None:
        async with self.make_store() as store:
            await store.create(session_id="taken")
            with pytest.raises(SessionExistsError, match="session 'taken' already exists"):
                await store.create(session_id="taken")
            with pytest.raises(ValidationError, match=r"session id '\.\./etc' is not valid"):
                await store.create(session_id="../etc")

    async def test_flushed_events_survive_a_restart_exactly(self) -> None:
        # Write a turn and flush it.
        async with self.make_store() as store:
            session = await store.create(session_id="s")
            _turn(session, 1)
            await session.flush()
            assert session.durable == session.head == 4
            written, last_hash = list(await session.events()), session.last_hash
        # A new store over the same data loads the same events and chain.
        async with self.make_store() as store:
            again = await store.open("s")
            _same(list(await again.events()), written)
            assert again.last_hash == last_hash
            assert (again.head, again.durable) == (4, 4)
            assert again.surface_index.nodes == [1]
            # It continues the log where it stopped.
            _turn(again, 2)
            await again.flush()
        async with self.make_store() as store:
            assert (await store.open("s")).head == 9

    async def test_closing_the_store_writes_what_was_committed(self) -> None:
        async with self.make_store() as store:
            session = await store.create(session_id="s")
            _turn(session, 1)
        async with self.make_store() as store:
            assert (await store.open("s")).head == 4

    async def test_open_of_a_missing_session_names_it(self) -> None:
        async with self.make_store() as store:
            with pytest.raises(SessionNotFoundError, match="session 'nope' does not exist"):
                await store.open("nope")

    async def test_a_second_writer_is_refused_until_the_first_closes(self) -> None:
        async with self.make_store() as store:
            first = await store.create(session_id="s")
            with pytest.raises(SessionBusyError):
                await store.open("s")
            # Another store in this same process is refused too.
            async with self.make_store() as other:
                with pytest.raises(SessionBusyError):
                    await other.open("s")
            await first.aclose()
            second = await store.open("s")
            assert second.head == -1

    async def test_concurrent_flushes_share_one_barrier(self) -> None:
        async with self.make_store() as store:
            a, b = await store.create(session_id="a"), await store.create(session_id="b")
            for i in range(50):
                _user(a, f"a{i}")
                _user(b, f"b{i}")
            async with anyio.create_task_group() as tg:
                for session in (a, b, a, b):
                    tg.start_soon(session.flush)
            assert (a.durable, b.durable) == (49, 49)

    async def test_the_background_writer_flushes_without_being_asked(self) -> None:
        async with self.make_store(write_delay=0.001) as store:
            session = await store.create(session_id="s")
            _user(session, "hi")
            # follow() yields only stored events: seeing it means the writer stored it unasked.
            with anyio.fail_after(10):
                async for event in store.follow("s"):
                    assert event.seq == 0
                    break

    # -- reading -------------------------------------------------------------------------------

    async def test_read_streams_a_range_without_the_lease(self) -> None:
        async with self.make_store() as store:
            session = await store.create(session_id="s")
            for i in range(30):
                _user(session, f"m{i}")
            await session.flush()
            seqs = [e.seq async for e in store.read("s", from_seq=10, limit=5)]
            assert seqs == [10, 11, 12, 13, 14]
            everything = [e async for e in store.read("s")]
            _same(everything, list(await session.events()))
            with pytest.raises(SessionNotFoundError):
                [e async for e in store.read("missing")]

    async def test_list_is_paginated_by_id(self) -> None:
        async with self.make_store() as store:
            for name in ("c", "a", "e", "b", "d"):
                await store.create(session_id=name)
            first = await store.list(limit=2)
            assert [i.id for i in first] == ["a", "b"]
            rest = await store.list(after="b", limit=10)
            assert [i.id for i in rest] == ["c", "d", "e"]
            with pytest.raises(ValidationError, match="list limit must be at least 1"):
                await store.list(limit=0)

    async def test_list_pages_walk_every_session_once_in_id_order(self) -> None:
        async with self.make_store() as store:
            names = ["k", "b2", "b10", "a", "zz", "m", "b1", "a0"]
            for name in names:
                await (await store.create(session_id=name)).aclose()
            # A deleted session leaves the pages; one created again comes back in its place.
            await store.delete("m")
            await store.delete("zz")
            await (await store.create(session_id="zz")).aclose()
            pages, after = [], None
            while True:
                page = await store.list(after=after, limit=3)
                pages.append([i.id for i in page])
                if len(page) < 3:
                    break
                after = page[-1].id
            assert pages == [["a", "a0", "b1"], ["b10", "b2", "k"], ["zz"]]
            # A page may start after an id that is not stored.
            assert [i.id for i in await store.list(after="b3", limit=10)] == ["k", "zz"]
            assert await store.list(after="zz") == []

    async def test_list_reports_heads_and_last_activity(self) -> None:
        async with self.make_store() as store:
            session = await store.create(session_id="s")
            _turn(session, 1)
            await session.flush()
            (info,) = await store.list()
            assert (info.id, info.head, info.error) == ("s", 4, None)
            assert info.last_time == (await session.events())[-1].time

    async def test_follow_yields_stored_then_live_events_once_each(self) -> None:
        async with self.make_store(write_delay=0.001) as store:
            session = await store.create(session_id="s")
            for i in range(3):
                _user(session, f"before {i}")
            await session.flush()
            seen: list[int] = []

            async def follow() -> None:
                async for event in store.follow("s", after=0):
                    seen.append(event.seq)
                    if event.seq == 7:
                        return

            with anyio.fail_after(20):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(follow)
                    for i in range(5):
                        _user(session, f"live {i}")
                        await session.flush()
            assert seen == [1, 2, 3, 4, 5, 6, 7]

    # -- fork and delete -----------------------------------------------------------------------

    async def test_fork_copies_the_prefix_and_marks_the_child(self) -> None:
        async with self.make_store() as store:
            parent = await store.create(session_id="p")
            _turn(parent, 1)
            _turn(parent, 2)
            await parent.flush()
            child = await store.fork("p", boundary=4)
            events = list(await child.events())
            assert [e.seq for e in events] == list(range(6))
            _same(events[:5], list(await parent.events())[:5])
            assert events[5].type == "session/forked"
            assert (events[5].data.parent, events[5].data.boundary) == ("p", 4)
            _turn(child, 2, "a different second turn")
            await child.flush()
            (info,) = [i for i in await store.list() if i.id == child.id]
            assert (info.parent_id, info.fork_seq, info.head) == ("p", 4, 10)
            assert parent.head == 9

    async def test_fork_refuses_a_boundary_inside_an_open_turn_or_outside_the_log(self) -> None:
        async with self.make_store() as store:
            parent = await store.create(session_id="p")
            _turn(parent, 1)
            await parent.flush()
            with pytest.raises(ValidationError, match="fork boundary 2 is inside turn 1"):
                await store.fork("p", boundary=2)
            with pytest.raises(ValidationError, match="fork boundary 9 is outside"):
                await store.fork("p", boundary=9)

    async def test_delete_removes_a_closed_session(self) -> None:
        async with self.make_store() as store:
            session = await store.create(session_id="s")
            _turn(session, 1)
            with pytest.raises(SessionBusyError):
                await store.delete("s")
            await session.aclose()
            await store.delete("s")
            with pytest.raises(SessionNotFoundError):
                await store.open("s")
            with pytest.raises(SessionNotFoundError):
                await store.delete("s")
            assert await store.list() == []

    # -- single writer -------------------------------------------------------------------------

    async def test_a_stale_writer_is_fenced_and_others_in_its_batch_are_not(self) -> None:
        async with self.make_store() as store, self.make_store() as other:
            stale = await store.create(session_id="s")
            bystander = await store.create(session_id="b")
            _user(stale, "first")
            await stale.flush()
            # The stale writer's lease is lost (as after an expiry) and another writer moves on.
            await store.drop_lease("s")
            winner = await other.open("s")
            _user(winner, "winner")
            await winner.flush()
            # The stale writer and a bystander commit into the same write round.
            _user(stale, "loser")
            _user(bystander, "unaffected")
            with pytest.raises(ConflictError, match="another writer advanced the stored log"):
                await stale.flush()
            await bystander.flush()
            assert bystander.durable == 0
            with pytest.raises(ConflictError):
                _user(stale, "again")
            stored = [e async for e in other.read("s")]
            assert [e.data.message.text for e in stored] == ["first", "winner"]

    # -- hardening: one bad row, stale writers, closed sessions, waiting for a lease ------------

    async def test_an_unstorable_row_fails_only_its_own_session(self) -> None:
        async with self.make_store(write_delay=3600) as store:
            bad = await store.create(session_id="bad")
            good = await store.create(session_id="good")
            # Both sessions commit into the same round: one good event, then the bad row.
            _user(bad, "kept")
            _plant_unstorable_time(bad)
            _user(good, "one")
            _user(good, "two")
            # The bad session's flush names the seq and the cause; the round wrote the others.
            with pytest.raises(StoreWriteError) as caught:
                await bad.flush()
            assert caught.value.seq == 1
            assert caught.value.message == (
                "session 'bad', seq 1: the event cannot be stored: time 9223372036854775808 "
                "is not a 64-bit integer; this session is fenced (events from seq 1 on are "
                "not written)"
            )
            await good.flush()
            assert (good.durable, bad.durable) == (1, 0)
            # The bad session stays fenced, with the same error; the good one keeps writing.
            with pytest.raises(StoreWriteError, match="seq 1: the event cannot be stored"):
                _user(bad, "after")
            _user(good, "three")
            await good.flush()
        # Reopened: everything flushed is there, the bad row nowhere.
        async with self.make_store() as store:
            assert await _texts(store, "good") == ["one", "two", "three"]
            reopened = await store.open("bad")
            assert [e.type for e in await reopened.events()] == ["user/message"]
            await reopened.aclose()

    async def test_a_stale_writer_never_writes_into_a_recreated_session(self) -> None:
        async with self.make_store() as first, self.make_store() as second:
            # The first store writes the session and keeps it open (it holds the lease).
            stale = await first.create(session_id="s")
            _user(stale, "old")
            await stale.flush()
            # Another store may not delete a session a live writer holds...
            with pytest.raises(SessionBusyError, match=r"is open for writing by .*; not deleted"):
                await second.delete("s")
            with pytest.raises(ValidationError, match="force must be True or False"):
                await second.delete("s", force="yes")  # type: ignore[arg-type]
            assert await _texts(second, "s") == ["old"]
            # ...unless forced. It creates the session again and writes one event: the stored
            # head is now 0, the very head the stale writer expects.
            await second.delete("s", force=True)
            fresh = await second.create(session_id="s")
            _user(fresh, "new")
            await fresh.flush()
            # The stale writer's next flush is fenced; nothing of it lands in the new session.
            _user(stale, "stale")
            with pytest.raises(ConflictError):
                await stale.flush()
            assert await _texts(second, "s") == ["new"]
            _user(fresh, "newer")
            await fresh.aclose()
            await stale.aclose()
        async with self.make_store() as store:
            reopened = await store.open("s")
            assert [e.data.message.text for e in await reopened.events()] == ["new", "newer"]
            await reopened.aclose()

    async def test_a_session_whose_writer_is_gone_can_be_deleted(self) -> None:
        async with self.make_store() as store:
            await (await store.create(session_id="s")).aclose()
        # Free (closed), and held by this very store: both deletable without force.
        async with self.make_store() as store:
            await store.delete("s")
            session = await store.create(session_id="s")
            with pytest.raises(SessionBusyError, match="open for writing in this store"):
                await store.delete("s")
            await session.aclose()
            await store.delete("s")

    async def test_flush_after_close_raises(self) -> None:
        async with self.make_store() as store:
            session = await store.create(session_id="s")
            _user(session, "a")
            await session.aclose()
            with pytest.raises(ClosedError, match="session 's' is closed"):
                await session.flush()
            left_open = await store.create(session_id="t")
        with pytest.raises(ClosedError):
            await left_open.flush()

    async def test_open_waits_for_a_live_writer_to_let_go(self) -> None:
        async with self.make_store() as first, self.make_store() as second:
            holder = await first.create(session_id="s")
            _user(holder, "a")
            # Without waiting, a live lease is refused at once; a short wait runs out.
            with pytest.raises(SessionBusyError):
                await second.open("s")
            with pytest.raises(SessionBusyError):
                await second.open("s", wait=0.1)
            for bad in (-1, float("nan"), float("inf"), 10**400, True, "1"):
                with pytest.raises(ValidationError, match="wait must be a number of seconds"):
                    await second.open("s", wait=bad)  # type: ignore[arg-type]
            # A waiting open returns once the holder closes; the holder closes only after the
            # waiter was refused at least once (the store says so), so it really waited.
            refused = lease_refusals(second)
            opened: list[Session] = []
            async with anyio.create_task_group() as tg:

                async def wait_and_open() -> None:
                    opened.append(await second.open("s", wait=60))

                tg.start_soon(wait_and_open)
                await refused.wait()
                await holder.aclose()
            assert [e.type for e in await opened[0].events()] == ["user/message"]
            await opened[0].aclose()

    # -- integrity and format ------------------------------------------------------------------

    async def test_a_flipped_byte_is_found_on_open_naming_the_seq(self) -> None:
        async with self.make_store() as store:
            session = await store.create(session_id="s")
            for i in range(6):
                _user(session, f"message {i}")
            _user(await store.create(session_id="other-untouched"), "fine")
        await self.tamper_event("s", 3)
        async with self.make_store() as store:
            # The tampered row still decodes (read does not check the chain): only the hash
            # chain can find it.
            texts = [e.data.message.text async for e in store.read("s")]
            assert texts[3] == "Message 3"
            with pytest.raises(
                CorruptLogError, match=r"session 's', seq 3: hash mismatch"
            ) as caught:
                await store.open("s")
            assert caught.value.seq == 3
            # Salvage opens read-only up to the last good event.
            salvaged = await store.open("s", salvage=True)
            assert salvaged.head == 2
            # It says why it stopped, in the words open used.
            assert salvaged.salvage_fault is not None
            assert str(salvaged.salvage_fault) == str(caught.value)
            assert (await store.open("other-untouched", salvage=True)).salvage_fault is None
            with pytest.raises(ClosedError, match="read-only"):
                _user(salvaged, "no")

    async def test_unknown_types_are_kept_if_ignorable_and_refused_otherwise(self) -> None:
        types = EventTypes()
        types.register("app/note", _Note, ignorable=True)
        types.register("app/strict", _Note)
        async with self.make_store(types=types) as store:
            session = await store.create(session_id="s")
            session.append("app/note", _Note(text="kept"))
            await session.flush()
            strict = await store.create(session_id="strict")
            strict.append("app/strict", _Note(text="needs its type"))
        async with self.make_store() as store:
            event = (await (await store.open("s")).events())[0]
            assert event.data == Unknown(b'{"text":"kept"}')
            with pytest.raises(UnsupportedFormatError, match="seq 0: event type 'app/strict'"):
                await store.open("strict")

    async def test_a_closed_store_refuses_work(self) -> None:
        store = self.make_store()
        async with store:
            session = await store.create(session_id="s")
        with pytest.raises(ClosedError, match="is closed"):
            await store.open("s")
        with pytest.raises(ClosedError):
            _user(session, "after close")

    # -- attachments ---------------------------------------------------------------------------

    async def test_attachments_are_stored_once_and_survive_a_restart(self) -> None:
        png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
        async with self.make_store() as store:
            # Content-addressed: the digest is the sha256 of the bytes; storing twice is one.
            digest = await store.put_attachment(png)
            assert digest == attachment_digest(png)
            assert await store.put_attachment(png) == digest
            session = await store.create(session_id="att")
            image = ImagePart(media_type="image/png", attachment=digest)
            pdf = FilePart(media_type="application/pdf", data=b"%PDF-1.4", filename="a.pdf")
            message = Message(id="m1", role="user", content=(TextPart(text="look"), image, pdf))
            session.append("turn/start", TurnStart(turn=1))
            session.append("user/message", UserMessage(message=message), surface=APPEND)
            session.append("step/start", StepStart(turn=1, step=1))
            session.append("step/end", StepEnd(turn=1, step=1))
            session.append("turn/end", TurnEnd(turn=1, reason="completed"))
            await session.flush()
            await session.aclose()
        async with self.make_store() as store:
            # After a restart the event still says what it said and the bytes read back.
            again = await store.open("att")
            assert (await again.events())[1].data.message == message
            assert await store.get_attachment(digest) == png
            result = Message.tool_result("c1", (TextPart(text="shot"), image))
            assert await store.load_attachments([message, result]) == {digest: png}
            assert await store.verify_attachments("att") == 1
            # A fork shares the store's attachments.
            child = await store.fork("att", boundary=4)
            assert await store.verify_attachments(child.id) == 1
            await child.aclose()
            await again.aclose()

    async def test_a_missing_attachment_is_named_where_it_is_read(self) -> None:
        absent = attachment_digest(b"never stored")
        async with self.make_store() as store:
            with pytest.raises(AttachmentNotFoundError, match=f"attachment {absent} is not"):
                await store.get_attachment(absent)
            session = await store.create(session_id="gone")
            image = ImagePart(media_type="image/png", attachment=absent)
            session.append("turn/start", TurnStart(turn=1))
            message = Message(id="m", role="user", content=(image,))
            session.append("user/message", UserMessage(message=message), surface=APPEND)
            await session.flush()
            # Opening does not read attachments; verifying names the event referencing it.
            await session.aclose()
            await (await store.open("gone")).aclose()
            with pytest.raises(AttachmentNotFoundError, match="session 'gone', seq 1: "):
                await store.verify_attachments("gone")

    async def test_a_changed_attachment_byte_is_found_naming_the_event(self) -> None:
        data = bytes(range(200)) * 10
        async with self.make_store() as store:
            digest = await store.put_attachment(data)
            session = await store.create(session_id="tamper")
            _turn(session, 1)
            image = ImagePart(media_type="image/webp", attachment=digest)
            session.append("turn/start", TurnStart(turn=2))
            message = Message(id="m", role="user", content=(TextPart(text="see"), image))
            session.append("user/message", UserMessage(message=message), surface=APPEND)
            await session.flush()
            await session.aclose()
        await self.tamper_attachment(digest)
        async with self.make_store() as store:
            # The log itself is intact: it opens (attachments are not read on open) ...
            await (await store.open("tamper")).aclose()
            # ... and the changed bytes are caught on verify, naming the event, and on read.
            with pytest.raises(CorruptLogError, match=f"seq 6: attachment {digest} was altered"):
                await store.verify_attachments("tamper")
            with pytest.raises(CorruptLogError, match=f"attachment {digest} was altered"):
                await store.get_attachment(digest)

    # -- snapshots (docs/stores.md) ------------------------------------------------------------

    async def _compacting_session(self, store: LogStore, turns: int = 12) -> Session:
        """A session of ``turns`` turns whose whole surface is replaced by a summary after
        every fourth turn (a compaction), flushed after each turn."""
        session = await store.create(session_id="long")
        for turn in range(1, turns + 1):
            _turn(session, turn, f"turn {turn}")
            if turn % 4 == 0:
                nodes = list(session.surface_index.nodes)
                summary = UserMessage(message=Message.user(f"summary up to turn {turn}"))
                session.append(
                    "user/message", summary, surface=Replace(nodes[0], nodes[-1]), sources=nodes
                )
            await session.flush()
        return session

    async def test_open_from_a_snapshot_equals_a_full_replay(self) -> None:
        # A compacting session, snapshotted at its compactions and every 20 events.
        async with self.make_store(snapshot_every=20) as store:
            session = await self._compacting_session(store)
            events = list(await session.events())
            expected = (session.head, session.last_hash, list(session.surface_index.nodes))
        async with self.make_store(snapshot_every=20) as store:
            resumed = await store.open("long")
            # It started from a snapshot (it holds only the events since, and the surface) ...
            assert resumed.snapshot_fault is None
            assert resumed.snapshot_seq is not None and resumed.snapshot_seq > 0
            assert resumed.loaded_from == resumed.snapshot_seq
            assert (resumed.head, resumed.last_hash, list(resumed.surface_index.nodes)) == expected
            # ... the surface's events and the later ones read as before ...
            for seq in [*resumed.surface_index.nodes, *range(resumed.loaded_from, resumed.head)]:
                _same([resumed.window().event(seq)], [events[seq]])
            # ... older ones are read from the store, and the window says where it starts.
            _same(list(await resumed.events()), events)
            _same([e async for e in resumed.read_events(0)], events)
            with pytest.raises(EventNotLoadedError, match=r"session 'long', seq 0: before the"):
                resumed.window(0)
            # It goes on writing where it stopped, and a full replay agrees with it.
            _turn(resumed, 13)
            await resumed.flush()
            after = (resumed.head, resumed.last_hash, list(resumed.surface_index.nodes))
            await resumed.aclose()
            full = await store.open("long", verify="full")
            assert (full.head, full.last_hash, list(full.surface_index.nodes)) == after
            assert (full.loaded_from, full.snapshot_seq) == (0, None)
            _same(list(await full.events())[: len(events)], events)

    async def test_a_damaged_snapshot_is_ignored_and_reported(self) -> None:
        async with self.make_store(snapshot_every=20) as store:
            session = await self._compacting_session(store)
            expected = (session.head, session.last_hash, list(session.surface_index.nodes))
        # (Closing the store waited for the snapshot writes in flight.)
        async with self.make_store(snapshot_every=20) as store:
            stored = await store.stored_snapshot("long")
            assert stored is not None
            seq, digest, data = stored
            # A torn write (the bytes cut short), a flipped byte and an unknown format: none
            # is used.
            middle = len(data) // 2
            flipped = data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1 :]
            for damaged in (data[:middle], flipped, data[:3] + b"\x09" + data[4:]):
                assert await store.store_snapshot("long", seq, digest, damaged)
                reopened = await store.open("long")
                assert reopened.snapshot_fault is not None
                assert reopened.snapshot_fault.startswith(f"snapshot at seq {seq} not used")
                assert (reopened.snapshot_seq, reopened.loaded_from) == (None, 0)
                state = (reopened.head, reopened.last_hash, list(reopened.surface_index.nodes))
                assert state == expected
                await reopened.aclose()

    async def test_a_full_open_finds_a_damaged_row_the_snapshot_covers(self) -> None:
        async with self.make_store(snapshot_every=20) as store:
            session = await self._compacting_session(store)
            await session.aclose()
        await self.tamper_event("long", 1)
        async with self.make_store(snapshot_every=20) as store:
            # The default open reads only what follows the snapshot: the damage is not seen.
            opened = await store.open("long")
            assert opened.loaded_from > 1 and 1 not in opened.pinned
            await opened.aclose()
            # A full open verifies the whole chain, and finds it.
            with pytest.raises(CorruptLogError, match=r"session 'long', seq 1: hash mismatch"):
                await store.open("long", verify="full")
            with pytest.raises(ValidationError, match='verify must be "snapshot" or "full"'):
                await store.open("long", verify="most")

    async def test_snapshots_are_deleted_with_their_session_and_not_forked(self) -> None:
        async with self.make_store(snapshot_every=20) as store:
            await self._compacting_session(store)
        async with self.make_store(snapshot_every=20) as store:
            assert await store.stored_snapshot("long") is not None
            # A fork starts without one (its chain is its own) ...
            child = await store.fork("long", 9, child_id="child")
            assert await store.stored_snapshot("child") is None
            assert child.loaded_from == 0
            await child.aclose()
            # ... and a delete takes the parent's with it.
            await store.delete("long")
            assert await store.stored_snapshot("long") is None
            # Snapshots off: none is written.
        async with self.make_store(snapshot_every=0) as store:
            session = await self._compacting_session(store)
            await session.aclose()
            assert await store.stored_snapshot("long") is None
