"""The core vocabulary's structure is checked at commit: turns and steps open and close in
order, messages carry their event's role; errors name the open turn and step. Logs that break
it and come from elsewhere (older versions, JSONL imports) are reported, not taken in."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from eventlog import (
    APPEND,
    AssistantMessage,
    Message,
    Session,
    StepEnd,
    StepStart,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
    ValidationError,
    open_store,
)
from eventlog.stores import MemoryData
from recovery import repair, scan
from tests.cli_fixtures import run_main
from tests.ill_formed import unchecked
from tests.three_stores import snapshot

pytestmark = pytest.mark.anyio


def start(n: int) -> tuple[str, Any]:
    return ("turn/start", TurnStart(turn=n))


def end(n: int) -> tuple[str, Any]:
    return ("turn/end", TurnEnd(turn=n, reason="completed"))


def step(t: int, s: int) -> tuple[str, Any]:
    return ("step/start", StepStart(turn=t, step=s))


def step_end(t: int, s: int) -> tuple[str, Any]:
    return ("step/end", StepEnd(turn=t, step=s))


def said(role: str) -> Message:
    return Message(id=f"m-{role}", role=role, content=())  # type: ignore[arg-type]


CASES = [
    ([], start(0), "seq 0: turn/start of turn 0: the next turn is 1"),
    ([], start(2), "seq 0: turn/start of turn 2: the next turn is 1"),
    ([start(1)], start(2), "seq 1: turn/start of turn 2, but turn 1 is open, no step"),
    ([start(1), end(1)], start(1), "seq 2: turn/start of turn 1: the next turn is 2"),
    ([], end(1), "seq 0: turn/end of turn 1, but no turn is open"),
    ([start(1)], end(2), "seq 1: turn/end of turn 2, but turn 1 is open, no step"),
    ([start(1), step(1, 1)], end(1), "turn/end of turn 1 before its step ends: turn 1, step 1"),
    ([], step(1, 1), "seq 0: step/start of turn 1, step 1, but no turn is open"),
    ([start(1)], step(1, 2), "step/start of turn 1, step 2: the next step of turn 1 is 1"),
    ([start(1)], step(2, 1), "step/start of turn 2, step 1, but turn 1 is open, no step"),
    ([start(1), step(1, 1)], step(1, 2), "step/start of turn 1, step 2, but turn 1, step 1 is"),
    (
        [start(1), step(1, 1), step_end(1, 1)],
        step(1, 1),
        "step/start of turn 1, step 1: the next step of turn 1 is 2",
    ),
    ([start(1)], step_end(1, 1), "step/end of turn 1, step 1, but turn 1 is open, no step"),
    ([start(1), step(1, 1)], step_end(1, 2), "step/end of turn 1, step 2, but turn 1, step 1"),
    ([start(1), step(1, 1)], step_end(2, 1), "step/end of turn 2, step 1, but turn 1, step 1"),
]


@pytest.mark.parametrize(("before", "bad", "text"), CASES)
async def test_an_impossible_turn_or_step_is_refused_and_changes_nothing(
    session: Session, before: list[tuple[str, Any]], bad: tuple[str, Any], text: str
) -> None:
    for type_, data in before:
        session.append(type_, data)
    seen: list[int] = []
    session.subscribe(lambda event: seen.append(event.seq))
    state = snapshot(session)
    with pytest.raises(ValidationError) as caught:
        session.append(*bad)
    assert text in str(caught.value)
    assert caught.value.seq == len(before)
    assert snapshot(session) == state and seen == []
    # The same data passed as a dict is refused the same way.
    with pytest.raises(ValidationError) as again:
        session.append(bad[0], {k: getattr(bad[1], k) for k in bad[1].__struct_fields__})
    assert text in str(again.value)


@pytest.mark.parametrize(
    ("type_", "make", "role", "text"),
    [
        ("user/message", lambda m: UserMessage(message=m), "assistant", "must be 'user'"),
        ("user/message", lambda m: UserMessage(message=m), "tool", "must be 'user'"),
        (
            "assistant/message",
            lambda m: AssistantMessage(turn=1, step=1, message=m),
            "user",
            "assistant/message carries a 'user' message; it must be 'assistant'",
        ),
        (
            "tool/result",
            lambda m: ToolResult(turn=1, step=1, message=m),
            "assistant",
            "tool/result carries a 'assistant' message; it must be 'tool'",
        ),
        (
            "tool/result",
            lambda m: ToolResult(turn=1, step=1, message=said("tool"), context=m),
            "assistant",
            "tool/result carries a 'assistant' context; it must be 'user'",
        ),
    ],
)
async def test_a_message_of_the_wrong_role_is_refused(
    session: Session, type_: str, make: Callable[[Message], Any], role: str, text: str
) -> None:
    session.append("turn/start", TurnStart(turn=1))
    session.append("step/start", StepStart(turn=1, step=1))
    state = snapshot(session)
    with pytest.raises(ValidationError, match=text):
        session.append(type_, make(said(role)), surface=APPEND)
    assert snapshot(session) == state


async def test_a_well_formed_run_with_recovery_closers_passes() -> None:
    disk = MemoryData()
    async with open_store("memory:", data=disk) as store:
        session = await store.create(session_id="s")
        for event in (start(1), step(1, 1), step_end(1, 1), step(1, 2)):
            session.append(*event)
        await session.flush()
    async with open_store("memory:", data=disk.restarted()) as store:
        # The crash left step 2 of turn 1 open: the closers are well-formed appends.
        session = await store.open("s")
        assert session.grammar.where() == "turn 1, step 2 is open"
        report = await repair(session)
        assert [session.window().event(s).type for s in report.appended] == ["step/end", "turn/end"]
        assert session.grammar.where() == "no turn is open"
        session.append(*start(2))  # the next turn follows


async def test_an_ill_formed_stored_log_still_opens_and_its_state_carries_on() -> None:
    disk = MemoryData()
    async with open_store("memory:", data=disk) as store:
        # A log written before the rules (turn 3 with no turn 1 or 2) ...
        session = unchecked(await store.create(session_id="old"))
        session.append(*start(3))
        await session.flush()
    async with open_store("memory:", data=disk.restarted()) as store:
        # ... opens, and the rules apply from the state it left: turn 3 is open.
        session = await store.open("old")
        assert scan(session).findings  # the readers still report it
        with pytest.raises(ValidationError, match="turn/start of turn 4, but turn 3 is open"):
            session.append(*start(4))
        session.append(*end(3))


def test_eventlog_import_refuses_an_ill_formed_log(tmp_path: Path) -> None:
    db = tmp_path / "a.db"

    async def write() -> None:
        async with open_store(f"sqlite:///{db}") as store:
            session = unchecked(await store.create(session_id="bad"))
            session.append(*start(1))
            session.append(*start(2))
            await session.aclose()

    anyio.run(write)
    exported = tmp_path / "bad.jsonl"
    assert run_main("export", "bad", "-o", str(exported), db=db).returncode == 0
    target = tmp_path / "b.db"
    result = run_main("import", str(exported), db=target)
    assert result.returncode == 2
    assert (
        f"{exported}:3: refusing to import: field `type`: session 'bad', seq 1: turn/start of "
        "turn 2, but turn 1" in result.stderr
    )
    assert run_main("sessions", db=target).stdout.count("bad") == 0
