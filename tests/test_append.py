"""Commit: every bad input to ``append`` gets its typed error and changes nothing.

Each scenario commits a little history, records what an observer and the session show, feeds
one bad input, and checks the error's type and text and that nothing moved.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
import pytest

from eventlog import (
    APPEND,
    AssistantMessage,
    BacklogFullError,
    ClosedError,
    Event,
    EventTypes,
    Message,
    PrefixView,
    ReentrancyError,
    Replace,
    RequestHeader,
    Session,
    StepStart,
    SurfaceError,
    ToolCallPart,
    TurnStart,
    UnknownEventTypeError,
    UserMessage,
    ValidationError,
    open_store,
)
from eventlog.stores import LogStore
from projections import messages, surface

pytestmark = pytest.mark.anyio


@pytest.fixture
async def store() -> AsyncIterator[LogStore]:
    async with open_store("memory:", max_event_bytes=4096) as store:
        yield store


@pytest.fixture
async def session(store: LogStore) -> Session:
    session = await store.create(session_id="s")
    session.append("turn/start", TurnStart(turn=1))
    session.append("user/message", UserMessage(message=Message.user("hi")), surface=APPEND)
    return session


def _snapshot(session: Session) -> tuple[int, int, list[Any], list[int], int]:
    return (
        session.head,
        session.durable,
        [msgspec.to_builtins(e) for e in session.window(0)],
        list(session.surface_index.nodes),
        session.surface_index.generation,
    )


BAD_INPUTS: list[tuple[str, Callable[[Session], object], type[Exception], str]] = [
    (
        "unknown type",
        lambda s: s.append("app/nope", {}),
        UnknownEventTypeError,
        "session 's', seq 2: event type 'app/nope' is not registered",
    ),
    (
        "wrong payload class",
        lambda s: s.append("turn/start", StepStart(turn=1, step=1)),
        ValidationError,
        "session 's', seq 2, type 'turn/start': Expected `TurnStart`, got `StepStart` - at `$`",
    ),
    (
        "field of the wrong type",
        lambda s: s.append("turn/start", {"turn": "one"}),
        ValidationError,
        "session 's', seq 2, type 'turn/start': Expected `int`, got `str` - at `$.turn`",
    ),
    (
        "missing field",
        lambda s: s.append("turn/start", {}),
        ValidationError,
        "Object missing required field `turn`",
    ),
    (
        "NaN",
        lambda s: s.append("request/header", RequestHeader(params={"temperature": float("nan")})),
        ValidationError,
        "Expected a finite `float` (JSON has no NaN or infinity), got"
        " nan - at `$.params.temperature`",
    ),
    (
        "infinity in a list",
        lambda s: s.append("request/header", {"params": {"stops": [1.0, float("inf")]}}),
        ValidationError,
        "Expected a finite `float` (JSON has no NaN or infinity), got inf - at `$.params.stops[1]`",
    ),
    (
        "oversized payload",
        lambda s: s.append("user/message", UserMessage(message=Message.user("x" * 5000))),
        ValidationError,
        "over the limit of 4096",
    ),
    (
        "missing surface op",
        lambda s: s.append("user/message", UserMessage(message=Message.user("x"))),
        ValidationError,
        "a surface type needs a surface operation (APPEND or Replace)",
    ),
    (
        "extra surface op",
        lambda s: s.append("turn/start", TurnStart(turn=2), surface=APPEND),
        ValidationError,
        "only user/message, assistant/message and tool/result take a surface operation",
    ),
    (
        "surface op of the wrong kind",
        lambda s: s.append(
            "user/message",
            UserMessage(message=Message.user("x")),
            surface=1,  # type: ignore[arg-type]
        ),
        ValidationError,
        "surface must be APPEND, Replace(start, end) or None, got 1",
    ),
    (
        "source from the future",
        lambda s: s.append("turn/start", TurnStart(turn=2), sources=(5,)),
        ValidationError,
        "source 5 is not the seq of an earlier event (0..1)",
    ),
    (
        "negative source",
        lambda s: s.append("turn/start", TurnStart(turn=2), sources=(-1,)),
        ValidationError,
        "source -1 is not the seq of an earlier event",
    ),
    (
        "duplicate sources",
        lambda s: s.append("turn/start", TurnStart(turn=2), sources=(0, 0)),
        ValidationError,
        "sources [0, 0] name the same event twice",
    ),
    (
        "replace of a node not on the surface",
        lambda s: s.append(
            "user/message",
            UserMessage(message=Message.user("summary")),
            surface=Replace(0, 1),
            sources=(0, 1),
        ),
        SurfaceError,
        "Replace(0, 1): seq 0 is not a current surface node",
    ),
    (
        "replace without covering sources",
        lambda s: s.append(
            "user/message", UserMessage(message=Message.user("summary")), surface=Replace(1, 1)
        ),
        SurfaceError,
        "Replace(1, 1): sources do not cover shadowed node(s) [1]",
    ),
    (
        "bad time",
        lambda s: s.append("turn/start", TurnStart(turn=2), time=-5),
        ValidationError,
        "time -5 is not epoch milliseconds",
    ),
]


@pytest.mark.parametrize(
    ("bad", "error", "text"),
    [pytest.param(b, e, t, id=name) for name, b, e, t in BAD_INPUTS],
)
async def test_bad_input_is_refused_and_changes_nothing(
    session: Session, bad: Callable[[Session], object], error: type[Exception], text: str
) -> None:
    # An observer records every commit it is told about.
    seen: list[int] = []
    session.subscribe(lambda event: seen.append(event.seq))
    before = _snapshot(session)
    # The bad input raises its typed error, naming the place.
    with pytest.raises(error) as caught:
        bad(session)
    assert text in str(caught.value)
    # Nothing moved: head, events, surface, observers.
    assert _snapshot(session) == before
    assert seen == []
    # And the session still works.
    assert session.append("turn/end", {"turn": 1, "reason": "completed"}).seq == 2
    assert seen == [2]


async def test_events_are_frozen_and_seq_equals_index(session: Session) -> None:
    event = session.append("turn/end", {"turn": 1, "reason": "completed"})
    assert [e.seq for e in await session.events()] == [0, 1, 2]
    assert (await session.events())[2] is event
    with pytest.raises(AttributeError):
        event.seq = 7  # type: ignore[misc]
    with pytest.raises(AttributeError):
        event.data.turn = 7


async def test_events_view_is_the_shared_immutable_prefix_view(session: Session) -> None:
    # The session's events and the projections' snapshots are one kind of view.
    whole, tail = session.window(), session.window(1)
    assert isinstance(whole, PrefixView) and isinstance(messages(session), PrefixView)
    assert isinstance(surface(session), PrefixView)
    # Later appends do not show through a view already handed out.
    session.append("turn/end", {"turn": 1, "reason": "completed"})
    assert (len(whole), len(tail), len(session.window())) == (2, 1, 3)
    assert tail[0] is whole[1] and tail[-1].seq == 1
    assert repr(tail) == "EventWindow(seq 1..1)"
    # Like every view: slices are tuples, equality is by items, and it is unhashable.
    assert whole[1:] == (whole[1],) and isinstance(whole[:1], tuple)
    assert whole == list(whole) and (await session.events(2)) != whole
    with pytest.raises(IndexError, match="event index out of range"):
        tail[1]
    with pytest.raises(TypeError):
        hash(whole)
    assert len(await session.events(7)) == 0


async def test_the_payload_is_a_validated_copy(session: Session) -> None:
    header = RequestHeader(params={"temperature": 0.5})
    event = session.append("request/header", header)
    assert event.data == header
    assert event.data is not header
    header.params["temperature"] = 2.0  # type: ignore[index]
    assert event.data.params == {"temperature": 0.5}


async def test_a_raising_observer_is_contained(
    session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[int] = []

    def broken(event: Event) -> None:
        raise RuntimeError("observer bug")

    session.subscribe(broken)
    session.subscribe(lambda event: seen.append(event.seq))
    event = session.append("turn/end", {"turn": 1, "reason": "completed"})
    # The commit stands, later observers still ran, and the failure was logged.
    assert session.head == event.seq == 2
    assert seen == [2]
    assert "observer" in caplog.text and "RuntimeError: observer bug" in caplog.text


async def test_appending_from_an_observer_is_refused(session: Session) -> None:
    errors: list[Exception] = []

    def reentrant(event: Event) -> None:
        try:
            session.append("turn/end", {"turn": 1, "reason": "completed"})
        except ReentrancyError as exc:
            errors.append(exc)

    session.subscribe(reentrant)
    session.append("step/start", StepStart(turn=1, step=1))
    assert session.head == 2
    assert len(errors) == 1
    assert "append called from inside an observer" in str(errors[0])


async def test_unsubscribe_stops_notifications(session: Session) -> None:
    seen: list[int] = []
    unsubscribe = session.subscribe(lambda event: seen.append(event.seq))
    session.append("step/start", StepStart(turn=1, step=1))
    unsubscribe()
    unsubscribe()  # idempotent
    session.append("step/end", {"turn": 1, "step": 1})
    assert seen == [2]


async def test_time_never_goes_backwards_and_can_be_given(session: Session) -> None:
    first = session.append("step/start", StepStart(turn=1, step=1), time=10**13)
    second = session.append("step/end", {"turn": 1, "step": 1})
    assert second.time >= first.time == 10**13


async def test_app_types_are_registered_and_validated() -> None:
    class Note(msgspec.Struct, frozen=True, kw_only=True):
        text: str

    types = EventTypes()
    types.register("app/note", Note, ignorable=True)
    with pytest.raises(ValidationError, match="event type 'app/note' is already registered"):
        types.register("app/note", Note)
    with pytest.raises(ValidationError, match="is not namespaced"):
        types.register("Note", Note)
    async with open_store("memory:", types=types) as store:
        session = await store.create()
        event = session.append("app/note", {"text": "hello"})
        assert event.data == Note(text="hello") and event.ignorable
        with pytest.raises(ValidationError, match="Expected `str`, got `int`"):
            session.append("app/note", {"text": 3})


async def test_a_replace_that_splits_a_tool_call_from_its_result_is_refused(
    session: Session,
) -> None:
    call = ToolCallPart(id="c1", name="read", arguments="{}")
    session.append(
        "assistant/message",
        AssistantMessage(turn=1, step=1, message=Message.assistant("x", tool_calls=(call,))),
        surface=APPEND,
    )
    with pytest.raises(SurfaceError, match="would separate a tool call from its result"):
        session.append(
            "user/message",
            UserMessage(message=Message.user("summary")),
            surface=Replace(1, 2),
            sources=(1, 2),
        )
    assert session.surface_index.nodes == [1, 2]


async def test_the_backlog_ceiling_refuses_commits_instead_of_growing() -> None:
    async with open_store("memory:", max_pending_bytes=2500, write_delay=60) as store:
        session = await store.create(session_id="s")
        text = "x" * 900  # about 1,050 bytes encoded: two fit under the ceiling, three do not
        for _ in range(2):
            session.append("user/message", UserMessage(message=Message.user(text)), surface=APPEND)
        with pytest.raises(BacklogFullError, match=r"session 's', seq 2: .* bytes are waiting"):
            session.append("user/message", UserMessage(message=Message.user(text)), surface=APPEND)
        assert session.head == 1
        # Once flushed, there is room again.
        await session.flush()
        session.append("user/message", UserMessage(message=Message.user(text)), surface=APPEND)
        assert session.head == 2


async def test_a_closed_session_refuses_appends(session: Session) -> None:
    await session.aclose()
    with pytest.raises(ClosedError, match="session 's' is closed"):
        session.append("turn/end", {"turn": 1, "reason": "completed"})
    assert repr(session) == "<Session 's' head=1 durable=1 closed>"
