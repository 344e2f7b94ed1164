"""LangGraph's official checkpointer suite (``langgraph-checkpoint-conformance``) against
:class:`EventlogSaver` on the memory store, a real SQLite file and the real PostgreSQL server.

The suite detects a capability by the saver overriding its method; every base capability must be
detected and pass, and so must every extended one the saver declares (``copy_thread``). The
extended ones it does not declare (``delete_for_runs``, ``prune``: they delete history from an
append-only log) must stay undetected, so the report cannot silently grow or shrink.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncGenerator, Callable, Iterator
from typing import Any

import anyio
import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import BASE_CAPABILITIES, Capability
from langgraph.checkpoint.conformance.report import CapabilityReport

from agent.integrations.langgraph import EventlogSaver, langgraph_types
from eventlog import open_store
from tests.pg_children.server import drop_schema, require_server, store_url

pytestmark = pytest.mark.anyio

DECLARED = {c.value for c in BASE_CAPABILITIES} | {Capability.COPY_THREAD.value}


async def _run_suite(name: str, next_url: Callable[[], str], **options: Any) -> CapabilityReport:
    """Run every capability, each on a fresh store (the suite asks for a fresh saver)."""

    @checkpointer_test(name=name)
    async def factory() -> AsyncGenerator[EventlogSaver, None]:
        async with open_store(next_url(), types=langgraph_types(), **options) as store:
            async with EventlogSaver(store) as saver:
                yield saver

    return await validate(factory)


def _check(report: CapabilityReport) -> None:
    # What the suite detected is exactly what the saver declares ...
    detected = {name for name, result in report.results.items() if result.detected}
    assert detected == DECLARED
    # ... and every detected capability passed every one of its tests.
    failures = {
        name: result.failures
        for name, result in report.results.items()
        if result.detected and not result.passed
    }
    assert failures == {}
    assert all(report.results[name].tests_passed > 0 for name in DECLARED)


async def test_the_official_suite_passes_on_memory() -> None:
    _check(await _run_suite("EventlogSaver[memory]", lambda: "memory:"))


async def test_the_official_suite_passes_on_sqlite(tmp_path: anyio.Path) -> None:
    counter = itertools.count()
    _check(
        await _run_suite(
            "EventlogSaver[sqlite]", lambda: f"sqlite:///{tmp_path}/lg-{next(counter)}.db"
        )
    )


async def test_the_official_suite_passes_when_every_read_goes_to_the_store(
    tmp_path: anyio.Path,
) -> None:
    # A snapshot after every flush, and each one drops from memory every event it covers:
    # the sessions hold only their latest event, so every checkpoint, blob and write the
    # suite reads back comes from the SQLite file through the saver's index.
    counter = itertools.count()
    _check(
        await _run_suite(
            "EventlogSaver[sqlite, trimmed]",
            lambda: f"sqlite:///{tmp_path}/lg-{next(counter)}.db",
            snapshot_every=1,
            trim_every=1,
        )
    )


@pytest.fixture
def pg_schemas() -> Iterator[Callable[[], str]]:
    """Store URLs, one new schema per call, all dropped afterwards."""
    require_server()
    made: list[str] = []

    def next_url() -> str:
        made.append(f"t_lg_{len(made)}_{id(made):x}")
        return store_url(made[-1])

    yield next_url
    for schema in made:
        anyio.run(drop_schema, schema)


@pytest.mark.postgres
async def test_the_official_suite_passes_on_postgres(pg_schemas: Callable[[], str]) -> None:
    _check(await _run_suite("EventlogSaver[postgres]", pg_schemas))
