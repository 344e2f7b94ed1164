"""``writer_alive``: the one reader of lease state, on every backend, against live and gone
writers (a session with a live writer shows as ``running``)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from eventlog import open_store
from eventlog.stores import writer_alive

from .cli_fixtures import HeldOpen, url_of
from .pg_children.server import fresh_schema, store_url


def _is_held(url: str, session_id: str) -> bool:
    async def read() -> bool:
        async with open_store(url) as store:
            return await writer_alive(store, session_id)

    return anyio.run(read)


def test_sqlite_a_live_process_and_a_killed_one(tmp_path: Path) -> None:
    path = tmp_path / "s.db"

    async def create() -> None:
        async with open_store(url_of(path)) as store:
            await (await store.create("s")).aclose()

    anyio.run(create)
    # Closed properly: no writer.
    assert _is_held(url_of(path), "s") is False
    # A real process holds it: alive; killed: its lease names a dead process.
    writer = HeldOpen(path, "s")
    try:
        assert _is_held(url_of(path), "s") is True
    finally:
        writer.close()
    assert _is_held(url_of(path), "s") is False
    assert _is_held(url_of(path), "nope") is False


def test_memory_store_in_this_process() -> None:
    async def scenario() -> tuple[bool, bool]:
        async with open_store("memory:") as store:
            session = await store.create("m")
            held = await writer_alive(store, "m")
            await session.aclose()
            return held, await writer_alive(store, "m")

    assert anyio.run(scenario) == (True, False)


@pytest.mark.postgres
def test_postgres_lease_held_then_released() -> None:
    with fresh_schema() as schema:
        url = store_url(schema)

        async def scenario() -> tuple[bool, bool, bool]:
            async with open_store(url) as writer_store, open_store(url) as reader:
                session = await writer_store.create("p")
                # Another store (another host, as far as the lease knows) sees it held.
                held = await writer_alive(reader, "p")
                await session.aclose()
                return held, await writer_alive(reader, "p"), await writer_alive(reader, "nope")

        assert anyio.run(scenario) == (True, False, False)
