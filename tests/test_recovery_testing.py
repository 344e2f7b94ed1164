"""recovery.testing itself: check_invariants names every violation; FaultyStore faults writes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import anyio
import pytest

from eventlog import (
    APPEND,
    AssistantMessage,
    AttachmentNotFoundError,
    Message,
    MessageSource,
    Session,
    StepEnd,
    StepStart,
    StoreWriteError,
    TextPart,
    ToolCallPart,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
    attachment_digest,
    open_store,
)
from eventlog.stores import Backend, MemoryBackend, MemoryData
from eventlog.stores._base import (
    BackgroundTask,
    LeaseReader,
    MaskedUrl,
    Snapshots,
)
from eventlog.stores.postgres import PostgresBackend
from eventlog.stores.sqlite import SQLiteBackend
from projections import timeline
from recovery.testing import (
    FaultyStore,
    InvariantViolation,
    SimulatedCrash,
    check_invariants,
    random_run,
)
from recovery.testing._faulty import ROUTES, FaultyBackend
from tests.ill_formed import unchecked
from tests.test_store_hardening import Place, _make_place

pytestmark = pytest.mark.anyio


@pytest.fixture
def session_id() -> str:
    return "s"  # named in this module's expected messages


def violations(session: Session) -> list[str]:
    with pytest.raises(InvariantViolation) as caught:
        check_invariants(session)
    assert str(caught.value).startswith(
        f"session 's' (head {session.head}) violates {len(caught.value.violations)} invariant(s):"
    )
    return list(caught.value.violations)


def user(text: str, id: str) -> UserMessage:
    return UserMessage(message=Message.user(text, id=id))


async def test_a_generated_run_passes(session: Session) -> None:
    await random_run(3).play(session)
    check_invariants(session)


async def test_open_turn_and_step_are_violations(session: Session) -> None:
    session.append("turn/start", TurnStart(turn=1))
    session.append("step/start", StepStart(turn=1, step=1))
    assert violations(session) == [
        "balance: turn 1 (seq 0) is still open",
        "balance: step 1.1 (seq 1) is still open",
    ]


async def test_broken_numbering_is_a_violation(session: Session) -> None:
    unchecked(session)  # an ill-formed log, as older versions wrote them
    session.append("turn/start", TurnStart(turn=2))
    session.append("turn/end", TurnEnd(turn=2, reason="completed"))
    assert violations(session) == ["timeline: seq 0: turn/start numbers turn 2, expected 1"]


async def test_a_result_answering_nothing_is_a_violation(session: Session) -> None:
    session.append("turn/start", TurnStart(turn=1))
    session.append("step/start", StepStart(turn=1, step=1))
    orphan = ToolResult(turn=1, step=1, message=Message.tool_result("x", "?", id="r"))
    session.append("tool/result", orphan, surface=APPEND)
    session.append("step/end", StepEnd(turn=1, step=1))
    session.append("turn/end", TurnEnd(turn=1, reason="completed"))
    assert violations(session) == [
        "timeline: seq 2: tool/result answers 'x', which was never proposed",
        "answers: message 0 (tool 'r') answers 'x'; expected no result",
    ]


async def test_results_out_of_the_models_order_are_a_violation(session: Session) -> None:
    session.append("turn/start", TurnStart(turn=1))
    session.append("step/start", StepStart(turn=1, step=1))
    calls = tuple(ToolCallPart(id=i, name="t", arguments="{}") for i in ("a", "b"))
    proposal = Message.assistant(tool_calls=calls, id="m")
    session.append(
        "assistant/message", AssistantMessage(turn=1, step=1, message=proposal), surface=APPEND
    )
    for call_id in ("b", "a"):
        data = ToolResult(turn=1, step=1, message=Message.tool_result(call_id, "", id=call_id))
        session.append("tool/result", data, surface=APPEND)
    session.append("step/end", StepEnd(turn=1, step=1))
    session.append("turn/end", TurnEnd(turn=1, reason="completed"))
    assert violations(session) == ["answers: message 1 (tool 'b') answers 'b'; expected 'a'"]


async def test_a_message_a_provider_refuses_is_a_violation(session: Session) -> None:
    odd = Message(
        id="u",
        role="user",
        content=(TextPart(text="hi"), ToolCallPart(id="c", name="t", arguments="{}")),
        source=MessageSource(kind="user"),
    )
    session.append("user/message", UserMessage(message=odd), surface=APPEND)
    found = violations(session)
    assert found[-2:] == [
        "provider: OpenAI refuses the history: message 'u' (user): a user message cannot carry "
        "a ToolCallPart",
        "provider: Anthropic refuses the history: message 'u' (user): a user message cannot "
        "carry a ToolCallPart",
    ]


async def test_a_projection_that_drifted_from_a_rebuild_is_a_violation(session: Session) -> None:
    session.append("user/message", user("one", "u1"), surface=APPEND)
    timeline(session)
    # Act out a projection bug: the cached state claims a turn is open.
    session.projection_cache["projections.timeline"].state.last_turn = 5
    session.projection_cache["projections.timeline"].state.snapshot = None
    assert violations(session) == [
        "rebuild: timeline caught up incrementally differs from a rebuild"
    ]


async def test_every_violation_is_listed_not_just_the_first(session: Session) -> None:
    unchecked(session)  # an ill-formed log, as older versions wrote them
    session.append("turn/start", TurnStart(turn=3))
    session.append("step/start", StepStart(turn=3, step=2))
    assert violations(session) == [
        "balance: turn 3 (seq 0) is still open",
        "balance: step 3.2 (seq 1) is still open",
        "timeline: seq 0: turn/start numbers turn 3, expected 1",
        "timeline: seq 1: step/start numbers step 2, expected 1",
    ]


# -- FaultyStore --------------------------------------------------------------------------------


async def test_a_failed_write_keeps_the_batch_and_the_next_flush_writes_it() -> None:
    disk = MemoryData()
    async with FaultyStore(open_store("memory:", data=disk), fail_at=1, failures=2) as store:
        session = await store.create(session_id="s")
        session.append("user/message", user("one", "u1"), surface=APPEND)
        await session.flush()  # write 0
        session.append("user/message", user("two", "u2"), surface=APPEND)
        for index in (1, 2):
            with pytest.raises(StoreWriteError) as caught:
                await session.flush()
            assert str(caught.value.__cause__) == f"write {index}: injected write failure"
        await session.flush()  # write 3
        assert (store.writes, store.crashed, session.durable) == (4, False, 1)
        # The helper proves its fault fired: two injected failures.
        assert store.failed == 2
    assert [row.seq for row in disk.rows["s"]] == [0, 1]


@pytest.mark.parametrize(("after_write", "stored"), [(False, [0]), (True, [0, 1])])
async def test_a_crash_stops_every_later_write(after_write: bool, stored: list[int]) -> None:
    disk = MemoryData()
    faulty = FaultyStore(
        open_store("memory:", data=disk), crash_at=1, crash_after_write=after_write
    )
    async with faulty as store:
        session = await store.create(session_id="s")
        session.append("user/message", user("one", "u1"), surface=APPEND)
        await session.flush()
        session.append("user/message", user("two", "u2"), surface=APPEND)
        with pytest.raises(StoreWriteError) as caught:
            await session.flush()
        landed = "after" if after_write else "before"
        assert isinstance(caught.value.__cause__, SimulatedCrash)
        assert str(caught.value.__cause__) == f"write 1: simulated crash {landed} the write"
        with pytest.raises(StoreWriteError) as again:
            await session.flush()
        assert str(again.value.__cause__) == "write 2: the store crashed at write 1"
        assert store.crashed and session.durable == 0
    assert [row.seq for row in disk.rows["s"]] == stored


async def test_faulty_store_wraps_a_backend_directly() -> None:
    from eventlog.stores import MemoryBackend

    async with FaultyStore(MemoryBackend(), crash_at=0) as store:
        session = await store.create(session_id="s")
        session.append("user/message", user("one", "u1"), surface=APPEND)
        with pytest.raises(StoreWriteError):
            await session.flush()
        assert repr(store) == "<LogStore 'faulty' open_sessions=1>"


# -- FaultyStore: no write route bypasses the fault ---------------------------------------------


def _methods(cls: type) -> set[str]:
    """The public methods of a backend class or ability protocol."""
    return {n for n in dir(cls) if not n.startswith("_") and callable(getattr(cls, n))}


def test_every_backend_method_is_a_route_the_wrapper_defines(tmp_path: Path) -> None:
    # Built, not started: the routes are the objects' methods, not their state.
    backends: list[Backend] = [
        MemoryBackend(),
        SQLiteBackend(str(tmp_path / "a.db")),
        PostgresBackend("postgresql://user:secret@127.0.0.1:5432/db"),
    ]
    protocols = (Backend, Snapshots, LeaseReader, BackgroundTask)
    for backend in backends:
        faulty = FaultyBackend(backend)
        # The wrapper has exactly the abilities of what it wraps (no more, no fewer) ...
        for ability in (*protocols, MaskedUrl):
            assert isinstance(faulty, ability) == isinstance(backend, ability), (backend, ability)
        assert faulty.abilities == backend.abilities
        names = _methods(type(backend)).union(*[_methods(p) for p in protocols])
        # ... every method any backend or ability has is a classified route ...
        unclassified = sorted(names - set(ROUTES))
        assert unclassified == [], f"{type(backend).__name__}: classify {unclassified} in ROUTES"
        for name in sorted(_methods(type(backend))):
            if ROUTES[name] == "background":
                # ... a backend's own background write runs only inside the wrapped task ...
                assert isinstance(faulty, BackgroundTask), name
                continue
            # ... and each is the wrapper's own method, never the backend's reached around it.
            owner = next(c for c in type(faulty).__mro__ if name in vars(c))
            assert owner.__module__ == FaultyBackend.__module__, (type(backend).__name__, name)
            assert getattr(faulty, name).__self__ is faulty, name
    # A method no route names is refused, not forwarded (a new write route fails loudly).
    with pytest.raises(AttributeError, match="does not forward 'extra'"):
        getattr(FaultyBackend(_WithExtra()), "extra")  # noqa: B009


class _WithExtra(MemoryBackend):
    async def extra(self) -> None:
        """A write route no one told the wrapper about."""


STORES = ["memory", "sqlite", "sqlite-thread", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=STORES)
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    with _make_place(request.param, tmp_path) as made:
        yield made


async def _flush_together(sessions: list[Session], cycle: int) -> list[StoreWriteError | None]:
    """Each session appends one event and flushes, all at once; each flush's error or None."""
    outcomes: list[StoreWriteError | None] = [None] * len(sessions)

    async def one(index: int, session: Session) -> None:
        session.append("user/message", user(f"c{cycle}", f"u{cycle}"), surface=APPEND)
        try:
            await session.flush()
        except StoreWriteError as exc:
            outcomes[index] = exc

    async with anyio.create_task_group() as tg:
        for index, session in enumerate(sessions):
            tg.start_soon(one, index, session)
    return outcomes


async def _stored_heads(place: Place, ids: list[str]) -> dict[str, int]:
    """The stored heads, read by a new store on the same data (the restart)."""
    async with place.store() as store:
        return {info.id: info.head for info in await store.list(limit=1000) if info.id in ids}


def _pipelined(place: Place, sessions: int) -> bool:
    """Whether the store's writer pipelines rounds through ``start_write`` (SQLite, many)."""
    return place.kind.startswith("sqlite") and sessions >= 16


@pytest.mark.parametrize("after_write", [False, True], ids=["before", "after"])
@pytest.mark.parametrize("sessions", [1, 16, 64])
async def test_after_a_crash_no_flush_succeeds_on_any_route(
    place: Place, sessions: int, after_write: bool
) -> None:
    ids = [f"s{i:02}" for i in range(sessions)]
    async with FaultyStore(place.store(), crash_at=3, crash_after_write=after_write) as store:
        group = [await store.create(session_id=sid) for sid in ids]
        # The sessions flush in step until the crash (write 3: from 16 sessions on SQLite the
        # rounds before it are pipelined, started on the backend's thread).
        cycle = 0
        while not store.crashed:
            cycle += 1
            await _flush_together(group, cycle)
        durable = {s.id: s.durable for s in group}
        committed = {s.id: s.head for s in group}
        if _pipelined(place, sessions):
            assert store.faults.routes["start_write"] >= 1  # that route went through the fault
        # 128 more flushes (at least): every one fails with the crash, nothing more is durable.
        attempts = 0
        while attempts < 128:
            cycle += 1
            outcomes = await _flush_together(group, cycle)
            for outcome in outcomes:
                assert outcome is not None and isinstance(outcome.__cause__, SimulatedCrash)
            attempts += len(outcomes)
        assert {s.id: s.durable for s in group} == durable
    # The restart finds what was durable at the crash, plus (crashing after the write) the
    # crashing round, whose acknowledgement alone was lost; nothing committed after the crash.
    stored = await _stored_heads(place, ids)
    assert all(durable[sid] <= stored[sid] <= committed[sid] for sid in ids), stored
    assert (stored != durable) == after_write


@pytest.mark.parametrize("sessions", [1, 16, 64])
async def test_injected_failures_fire_and_lose_nothing(place: Place, sessions: int) -> None:
    ids = [f"s{i:02}" for i in range(sessions)]
    async with FaultyStore(place.store(), fail_at=3, failures=2) as store:
        group = [await store.create(session_id=sid) for sid in ids]
        failed = 0
        for cycle in range(8):
            outcomes = await _flush_together(group, cycle)
            for outcome in outcomes:
                if outcome is not None:
                    assert str(outcome.__cause__).endswith("injected write failure")
                    failed += 1
        # The fault fired (on each failing round, at least one flusher learnt it) ...
        assert failed >= 2 and store.writes > 5 and not store.crashed
        assert store.failed == 2  # the wrapper's own count: exactly the rounds it failed
        if _pipelined(place, sessions):
            assert store.faults.routes["start_write"] >= 1
        # ... and the retries wrote every event: nothing was lost.
        await _flush_together(group, 8)
        assert all(s.durable == s.head == 8 for s in group)
    assert await _stored_heads(place, ids) == dict.fromkeys(ids, 8)


async def test_a_crashed_store_refuses_every_other_write_route(place: Place) -> None:
    async with place.store() as store:
        kept = await store.create(session_id="kept")
        say(kept, "stored")
        await kept.aclose()
        await (await store.create(session_id="closed")).aclose()
    async with FaultyStore(place.store(), crash_at=0) as store:
        session = await store.open("kept")
        say(session, "lost")
        with pytest.raises(StoreWriteError):
            await session.flush()
        assert store.crashed
        # Creating, forking, deleting, taking a lease, storing an attachment or a snapshot:
        # each is refused by the wrapper, before the backend sees it.
        refused: list[Callable[[], Awaitable[object]]] = [
            lambda: store.create(session_id="new"),
            lambda: store.fork("kept", 0, child_id="child"),
            lambda: store.delete("closed"),
            lambda: store.open("closed"),
            lambda: store.put_attachment(b"png"),
            lambda: store.store_snapshot("kept", 0, b"\0" * 32, b"data"),
        ]
        for call in refused:
            with pytest.raises(SimulatedCrash, match="the store crashed at write 0"):
                await call()
        routes = store.faults.routes
        assert all(routes[r] >= 1 for r in ("create_session", "delete_session", "write_snapshot"))
    # Nothing of it reached the data.
    async with place.store() as store:
        assert sorted(i.id for i in await store.list()) == ["closed", "kept"]
        assert [e.seq async for e in store.read("kept")] == [0]
        assert await store.stored_snapshot("kept") is None
        with pytest.raises(AttachmentNotFoundError):
            await store.get_attachment(attachment_digest(b"png"))


def say(session: Session, text: str) -> None:
    session.append("user/message", user(text, text), surface=APPEND)
