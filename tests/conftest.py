"""Shared test configuration: the anyio backend, the hypothesis profiles and the ``session``
fixture (a new session in a fresh ``memory:`` store).

``HYPOTHESIS_PROFILE=soak`` (``make soak``) runs the long profile; the default is fast so the
full ``make test`` stays within minutes on two cores.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest
from hypothesis import HealthCheck, settings

from eventlog import Session, open_store

settings.register_profile(
    "fast",
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "soak",
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fast"))

# A bug in the command shows its traceback in the tests (and in every command they start),
# instead of the one line a user gets: it must not pass for a refusal.
os.environ.setdefault("EVENTLOG_TRACEBACK", "1")

#: True when running the long soak profile (crash tests use more kills).
SOAK = os.environ.get("EVENTLOG_SOAK") == "1"


@pytest.fixture
def anyio_backend() -> str:
    # asyncpg, and the SQLite worker threads (they answer through loop.call_soon_threadsafe),
    # are asyncio-only.
    return "asyncio"


@pytest.fixture
def session_id() -> str:
    """The id of the ``session`` fixture; a module overrides it where its messages name another."""
    return "s1"


@pytest.fixture
async def session(session_id: str) -> AsyncIterator[Session]:
    """A new session in a fresh ``memory:`` store, closed with the store after the test."""
    async with open_store("memory:") as store:
        yield await store.create(session_id=session_id)
