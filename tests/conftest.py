"""Shared test configuration: the anyio backend and the hypothesis profiles.

``HYPOTHESIS_PROFILE=soak`` (``make soak``) runs the long profile; the default is fast so the
full ``make test`` stays within minutes on two cores.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

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

#: True when running the long soak profile (crash tests use more kills).
SOAK = os.environ.get("EVENTLOG_SOAK") == "1"


@pytest.fixture
def anyio_backend() -> str:
    # aiosqlite and asyncpg are asyncio-only.
    return "asyncio"
