"""A child process whose disk fails under its SQLite store, then recovers.

``python disk_full.py PATH INLINE_WRITE_BYTES`` prints one JSON report (``0`` writes every round
on the store's writer thread; the default writes these small rounds on the event loop's). The
fault is real: ``RLIMIT_FSIZE`` makes every ``write(2)`` past byte 64 of any file fail with
``EFBIG`` (``SIGXFSZ`` is ignored), as a full disk would; raising the limit again clears it. It
runs in a child because the limit holds for the whole process.
"""

from __future__ import annotations

import json
import resource
import signal
import sys
from typing import Any

import anyio

from eventlog import APPEND, Message, StoreWriteError, UserMessage, open_store


async def main(path: str, inline_write_bytes: int) -> None:
    report: dict[str, Any] = {}
    url = f"sqlite:///{path}"
    async with open_store(url, inline_write_bytes=inline_write_bytes) as store:
        session = await store.create(session_id="s")

        def commit(count: int) -> None:
            for _ in range(count):
                text = f"message {session.head + 1}"
                session.append(
                    "user/message", UserMessage(message=Message.user(text)), surface=APPEND
                )

        commit(5)
        await session.flush()
        # The disk fails.
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, hard))
        commit(5)
        errors = []
        for more in (0, 3):
            commit(more)  # commits keep working while the disk fails
            try:
                await session.flush()
            except StoreWriteError as exc:
                cause = exc.__cause__
                errors.append(
                    {
                        "message": exc.message,
                        "cause": type(cause).__name__,
                        "driver": type(cause.__cause__).__name__ if cause else None,
                    }
                )
        report["errors"] = errors
        report["while_failing"] = {
            "head": session.head,
            "durable": session.durable,
            "in_memory": [e.seq for e in await session.events()],
        }
        # The fault clears: the next flush writes everything once.
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        await session.flush()
        report["after"] = {"head": session.head, "durable": session.durable}
    async with open_store(url) as store:
        stored = [e async for e in store.read("s")]
        report["stored"] = [e.seq for e in stored]
        report["texts"] = [e.data.message.text for e in stored]
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], int(sys.argv[2]))
