"""The three real stores side by side, for tests that must hold on each: ``memory:`` (its data
kept across reopen), a real SQLite file and the real PostgreSQL server (a fresh schema)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from eventlog import Session, open_store
from eventlog.stores import LogStore, MemoryData
from projections import messages, surface
from tests.pg_children.server import fresh_schema, store_url

__all__ = ("STORES", "Opener", "snapshot", "stores")

STORES = ("memory", "sqlite", "postgresql")


class Opener:
    """Opens the same stored data again and again (a reopen sees what was flushed)."""

    def __init__(self, kind: str, url: str, data: MemoryData | None = None) -> None:
        self.kind = kind
        self.url = url
        self.data = data

    def __call__(self, **options: Any) -> LogStore:
        if self.data is not None:
            return open_store(self.url, data=self.data.restarted(), **options)
        if self.kind == "postgresql":
            options.setdefault("lease_ttl", 5.0)
        return open_store(self.url, **options)

    def __repr__(self) -> str:
        return f"Opener({self.kind})"


@pytest.fixture(params=STORES)
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """An :class:`Opener` for each store in turn."""
    kind: str = request.param
    if kind == "memory":
        yield Opener(kind, "memory:", MemoryData())
    elif kind == "sqlite":
        yield Opener(kind, f"sqlite:///{tmp_path / 'store.db'}")
    else:
        with fresh_schema() as schema:
            yield Opener(kind, store_url(schema))


def snapshot(session: Session) -> tuple[Any, ...]:
    """Everything a refused call must leave as it was: watermarks, events, the surface index
    and the projections read from it."""
    return (
        session.head,
        session.durable,
        [msgspec.to_builtins(e) for e in session.window(0)],
        list(session.surface_index.nodes),
        session.surface_index.generation,
        [msgspec.to_builtins(m) for m in messages(session)],
        list(surface(session)),
        [surface(session).balanced_after(seq) for seq in surface(session)],
        repr(session.grammar),
    )
