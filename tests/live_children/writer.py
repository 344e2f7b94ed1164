"""A live writer: ``python -m tests.live_children.writer URL SESSION_ID``.

Creates SESSION_ID and writes turns into it forever, as ``tests/pg_children/host.py``'s ``loop``
does (flushing before the model request, after ``tool/call`` and at step end, printing
``flushed DURABLE`` after each flush), compacting the whole surface every third turn, with a
snapshot every few events: a reader meets every state a healthy live session passes through
(an open turn, an open step, a dangling call, a fresh compaction, a snapshot written a moment
ago). The parent ends it with SIGKILL.
"""

from __future__ import annotations

import sys

import anyio

from eventlog import open_store
from tests.pg_children.host import _loop


async def main(url: str, session_id: str) -> None:
    options = {"lease_ttl": 5.0} if url.startswith("postgres") else {}
    async with open_store(url, snapshot_every=7, **options) as store:
        session = await store.create(session_id=session_id)
        await _loop(session, compact_every=3)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
