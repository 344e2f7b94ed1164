"""Conformance cases: what a store hands back is what was written. The hash chain finds a changed
byte (and salvage opens up to it), unknown types are kept when ignorable and refused otherwise,
a closed store refuses work, and attachments are stored once, named when missing and caught
when changed.
"""

from __future__ import annotations

import pytest

from .._errors import AttachmentNotFoundError, ClosedError, CorruptLogError, UnsupportedFormatError
from .._event import APPEND, Unknown
from .._message import FilePart, ImagePart, Message, TextPart, attachment_digest
from .._registry import EventTypes
from .._vocabulary import StepEnd, StepStart, TurnEnd, TurnStart, UserMessage
from ._helpers import Note, append_turn, append_user
from ._hooks import StoreHooks

__all__ = ("IntegrityCases",)


class IntegrityCases(StoreHooks):
    """The cases of tampered rows, unknown types, a closed store and attachments."""

    # -- integrity and format ------------------------------------------------------------------

    async def test_a_flipped_byte_is_found_on_open_naming_the_seq(self) -> None:
        async with self.make_store() as store:
            session = await store.create(session_id="s")
            for i in range(6):
                append_user(session, f"message {i}")
            append_user(await store.create(session_id="other-untouched"), "fine")
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
                append_user(salvaged, "no")

    async def test_unknown_types_are_kept_if_ignorable_and_refused_otherwise(self) -> None:
        types = EventTypes()
        types.register("app/note", Note, ignorable=True)
        types.register("app/strict", Note)
        async with self.make_store(types=types) as store:
            session = await store.create(session_id="s")
            session.append("app/note", Note(text="kept"))
            await session.flush()
            strict = await store.create(session_id="strict")
            strict.append("app/strict", Note(text="needs its type"))
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
            append_user(session, "after close")

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
            append_turn(session, 1)
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
