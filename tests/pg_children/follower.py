"""A follower process: ``python -m tests.pg_children.follower URL SESSION_ID LAST``.

Prints ``ready`` once its store is open, then the seq of every event ``follow`` yields, one
per line, and ends after seq ``LAST``.
"""

from __future__ import annotations

import sys

import anyio

from eventlog import open_store


async def main(url: str, session_id: str, last: int) -> None:
    async with open_store(url) as store:
        print("ready", flush=True)
        async for event in store.follow(session_id):
            print(event.seq, flush=True)
            if event.seq >= last:
                return


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]))
