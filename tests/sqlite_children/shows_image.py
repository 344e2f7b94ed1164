"""A child process that stores a session showing an image, then holds it open.

``python shows_image.py URL SESSION_ID HEX`` puts the bytes ``HEX`` as an attachment, creates
the session with one user message showing it, flushes, prints ``stored`` and keeps the store
open until its stdin is closed: another process's session referencing the same bytes.
"""

from __future__ import annotations

import sys

import anyio

from eventlog import APPEND, ImagePart, Message, MessageSource, UserMessage, open_store


async def main(url: str, session_id: str, data: bytes) -> None:
    async with open_store(url) as store:
        digest = await store.put_attachment(data)
        session = await store.create(session_id=session_id)
        image = ImagePart(media_type="image/png", attachment=digest)
        message = Message(id="m0", role="user", content=(image,), source=MessageSource(kind="user"))
        session.append("user/message", UserMessage(message=message), surface=APPEND)
        await session.flush()
        print("stored", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.read)  # until the parent closes stdin
        await session.aclose()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], bytes.fromhex(sys.argv[3]))
