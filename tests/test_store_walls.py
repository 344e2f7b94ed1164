"""The store's wall: outside ``eventlog/stores`` nothing reaches through ``store.backend``.

The CLI, the report, the web app and the testing helpers use the public store API
(``LogStore.record``, ``read_rows``, ``restore``, ``drop_lease``, ``simulate_crash``,
``watch_lease_refusals``, ``options_over``); the backend under a store is the store's business.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from eventlog import (
    APPEND,
    ConflictError,
    Message,
    Session,
    UserMessage,
    ValidationError,
    open_store,
)
from eventlog.stores import LogStore, MemoryData
from eventlog.stores._base import Backend

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("eventlog", "projections", "recovery", "agent")
STORES = ROOT / "eventlog" / "stores"


def _backend_accesses(source: str, filename: str) -> list[int]:
    """The lines of ``source`` that read or write an attribute named ``backend``."""
    tree = ast.parse(source, filename=filename)
    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr == "backend"
    )


def test_the_finder_sees_every_kind_of_backend_access() -> None:
    # Reads, calls through it, assignments and a getattr-free chain are all attribute nodes.
    source = (
        "x = store.backend\n"
        "await store.backend.close()\n"
        "store.backend.acquire_lease = watched\n"
        "y = self.store.backend.read_rows('s', 0, 1)\n"
        "backend = 1  # a plain name is not an access\n"
    )
    assert _backend_accesses(source, "<sample>") == [1, 2, 3, 4]


def test_no_package_outside_the_stores_reaches_through_store_backend() -> None:
    offenders = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.is_relative_to(STORES):
                continue
            lines = _backend_accesses(path.read_text(), str(path))
            offenders += [f"{path.relative_to(ROOT)}:{line}" for line in lines]
    assert offenders == []


# -- the public API the tools use instead ---------------------------------------------------------


def _user(session: Session, text: str) -> None:
    session.append("user/message", UserMessage(message=Message.user(text)), surface=APPEND)


@pytest.mark.anyio
async def test_a_simulated_crash_keeps_what_was_flushed_and_loses_the_rest(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'crash.db'}"
    async with open_store(url) as store:
        session = await store.create(session_id="s")
        _user(session, "flushed")
        await session.flush()
        _user(session, "pending")
        # The connections go as a killed process's do; closing the store afterwards raises
        # nothing although its final write and lease release fail.
        await store.simulate_crash()
        await store.simulate_crash()  # idempotent
    # A new process finds the flushed event only, and takes the dead store's lease at once.
    async with open_store(url) as again:
        reopened = await again.open("s")
        assert [e.data.message.text for e in await reopened.events()] == ["flushed"]
        await reopened.aclose()


@pytest.mark.anyio
async def test_a_dropped_lease_fences_the_writer_that_held_it() -> None:
    data = MemoryData()
    async with open_store("memory:", data=data) as store, open_store("memory:", data=data) as other:
        stale = await store.create(session_id="s")
        with pytest.raises(ValidationError):
            await store.drop_lease("not a valid id")
        await store.drop_lease("s")
        # Another store may now open the session; the stale writer is fenced at its next write.
        winner = await other.open("s")
        _user(stale, "loser")
        with pytest.raises(ConflictError):
            await stale.flush()
        await winner.aclose()


@pytest.mark.anyio
async def test_options_over_wraps_only_a_store_not_yet_entered() -> None:
    store = open_store("memory:", max_nesting=12)
    seen: list[Backend] = []

    def wrap(backend: Backend) -> Backend:
        seen.append(backend)
        return backend

    options = store.options_over(wrap)
    assert options["max_nesting"] == 12 and options["backend"] is seen[0]
    async with LogStore(**options) as rebuilt:
        assert await rebuilt.list() == []
    async with open_store("memory:") as entered:
        with pytest.raises(ValidationError, match="was entered already"):
            entered.options_over(wrap)
