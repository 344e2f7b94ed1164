"""The store engine's contracts are classes the implementations subclass, and a backend's
optional abilities are runtime-checkable protocols (never found by name or ``getattr``)."""

from __future__ import annotations

import pydoc
import re
from pathlib import Path

import pytest

from eventlog.stores import (
    Backend,
    BackendAbilities,
    LogStore,
    MemoryBackend,
    Pipeline,
    Store,
)
from eventlog.stores._base import (
    BackgroundTask,
    LeaseReader,
    MaskedUrl,
)
from eventlog.stores.postgres import PostgresBackend
from eventlog.stores.sqlite import SQLiteBackend
from recovery.testing import FaultyStore
from recovery.testing._faulty import FaultyBackend

STORES = Path(__file__).resolve().parent.parent / "eventlog" / "stores"


def test_implementations_subclass_the_contracts_so_help_shows_them() -> None:
    # The store and every backend name the protocol they implement ...
    assert issubclass(LogStore, Store) and issubclass(FaultyStore, Store)
    for backend in (MemoryBackend, SQLiteBackend, PostgresBackend, FaultyBackend):
        # (explicitly: the contract declares data, the abilities, which issubclass() of a
        # protocol cannot check)
        assert Backend in backend.__mro__, backend
    # ... so help() on them shows the contract, the guarantees documented once in base.
    assert "Durable on return" in pydoc.render_doc(SQLiteBackend)
    assert "SessionBusyError" in pydoc.render_doc(LogStore)


def test_each_backend_has_exactly_the_abilities_it_implements(tmp_path: Path) -> None:
    # Built, not started: the abilities are the objects' methods, not their state.
    sqlite = SQLiteBackend(str(tmp_path / "a.db"))
    postgres = PostgresBackend("postgresql://user:secret@127.0.0.1:5432/db")
    memory = MemoryBackend()
    assert isinstance(postgres, BackgroundTask) and not isinstance(sqlite, BackgroundTask)
    assert isinstance(postgres, MaskedUrl) and "secret" not in postgres.display_url
    # The write abilities are data each backend declares: only SQLite writes on a thread of
    # its own, where a round can start without a task; only PostgreSQL's rounds are written by
    # a server while the loop goes on (pipelined in tasks); the memory store's writes are
    # instant, one round after another.
    assert sqlite.abilities == BackendAbilities(pipeline=Pipeline.THREAD)
    assert postgres.abilities == BackendAbilities(pipeline=Pipeline.TASK)
    assert memory.abilities == BackendAbilities() and memory.abilities.pipeline is Pipeline.NONE
    for backend in (sqlite, postgres, memory):
        assert isinstance(backend, LeaseReader) and isinstance(backend, Backend)
    # The fault-injecting wrapper passes its backend's abilities through, and only those.
    faulty = FaultyBackend(memory)
    assert isinstance(faulty, LeaseReader) and isinstance(faulty, Backend)
    assert not isinstance(faulty, BackgroundTask | MaskedUrl)
    assert FaultyBackend(sqlite).abilities == sqlite.abilities
    assert FaultyBackend(postgres).abilities == postgres.abilities


@pytest.mark.parametrize("path", sorted(STORES.rglob("*.py")), ids=lambda p: p.name)
def test_no_ability_is_found_by_name(path: Path) -> None:
    # Capabilities are checked with isinstance against the protocols above.
    text = path.read_text()
    assert re.search(r"getattr\((self\.)?backend\b", text) is None
    assert re.search(r"type\((self\.)?backend\)\.__name__", text) is None
