"""A dsh log cut after any line (a crash) imports, repairs and keeps every invariant.

The importer maps each line knowing only the lines before it, so a cut log must import as a
prefix of the whole log's import: same seqs, types, times, payloads, surface operations and
sources. Repair then closes whatever the cut left open.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import anyio
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from eventlog import Event, open_store
from eventlog.importers import import_dsh
from recovery import repair
from recovery.testing import check_invariants

from .dsh_logs import DSH_FILES, DSH_LOGS, needs_dsh_logs


@cache
def lines_of(path: Path) -> tuple[str, ...]:
    return tuple(path.read_text().splitlines())


@cache
def whole_import(path: Path) -> tuple[Event, ...]:
    async def run() -> tuple[Event, ...]:
        async with open_store("memory:") as store:
            report = await import_dsh(store, path)
            session = await store.open(report.session_id)
            events = tuple(await session.events())
            await session.aclose()
            return events

    return anyio.run(run)


def check_cut(path: Path, cut: int) -> None:
    """Import ``path`` cut after line ``cut`` (1 = the header alone), repair, check."""
    whole = whole_import(path)

    async def run() -> None:
        async with open_store("memory:") as store:
            report = await import_dsh(store, lines_of(path)[:cut])
            session = await store.open(report.session_id)
            events = tuple(await session.events())
            assert events == whole[: len(events)]
            await repair(session)
            check_invariants(session)
            await session.aclose()

    anyio.run(run)


@st.composite
def cuts(draw: st.DrawFn) -> tuple[Path, int]:
    path = draw(st.sampled_from(DSH_FILES))
    return path, draw(st.integers(1, len(lines_of(path))))


@needs_dsh_logs
@settings(max_examples=max(400, settings().max_examples))  # the soak profile runs more
@given(cuts())
def test_any_cut_imports_as_a_prefix_and_repairs(case: tuple[Path, int]) -> None:
    path, cut = case
    note(f"{path.name} cut after line {cut}")
    check_cut(path, cut)


# Every cut of the logs that exercise replaces, cancels and an unfinished run.
EXHAUSTIVE = [
    "headless-agent--compaction-recovery.jsonl",
    "acp-agent--agent-instructions.jsonl",
    "acp-agent--cancel-tool-calls.jsonl",
    "acp-agent--parallel-tool-calls.jsonl",
    "acp-agent--max-tokens-continue.jsonl",
    "acp-agent--empty-response-retry.jsonl",
    "web--code-mode-round.jsonl",
    "test-support--acp-snapshot--suite--pin-turn.jsonl",
]


@needs_dsh_logs
@pytest.mark.parametrize("name", EXHAUSTIVE)
def test_every_cut_of_chosen_logs(name: str) -> None:
    path = DSH_LOGS / name
    for cut in range(1, len(lines_of(path)) + 1):
        check_cut(path, cut)
