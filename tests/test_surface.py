"""The surface index (eventlog/_surface.py) and its read view (projections.surface).

Every refusal of a surface operation has a test with its exact message, and each checks that
the refused append left the session and every projection exactly as they were.
"""

from __future__ import annotations

import pytest

from eventlog import (
    APPEND,
    AssistantMessage,
    Message,
    Replace,
    Session,
    SurfaceError,
    TextPart,
    ToolCallPart,
    ToolError,
    ToolResult,
    ToolResultPart,
    TurnStart,
    UserMessage,
    fold_surface,
    open_store,
)
from eventlog.stores import MemoryData
from projections import inbox, messages, surface, timeline

pytestmark = pytest.mark.anyio


def user(session: Session, text: str = "hi") -> int:
    return session.append(
        "user/message", UserMessage(message=Message.user(text)), surface=APPEND
    ).seq


def checkpoint(session: Session, start: int, end: int, sources: tuple[int, ...]) -> int:
    message = Message.user("summary of earlier work")
    data = UserMessage(message=message)
    return session.append("user/message", data, surface=Replace(start, end), sources=sources).seq


def propose(session: Session, *call_ids: str) -> int:
    calls = tuple(ToolCallPart(id=c, name="read", arguments="{}") for c in call_ids)
    data = AssistantMessage(turn=1, step=1, message=Message.assistant("ok", tool_calls=calls))
    return session.append("assistant/message", data, surface=APPEND).seq


def answer(session: Session, call_id: str, content: str = "file contents") -> int:
    data = ToolResult(turn=1, step=1, message=Message.tool_result(call_id, content))
    return session.append("tool/result", data, surface=APPEND).seq


def reads(session: Session) -> tuple[object, ...]:
    """Everything the projections show, as plain values."""
    return (
        session.head,
        tuple(surface(session)),
        surface(session).generation,
        tuple(messages(session)),
        inbox(session),
        timeline(session),
    )


def refused(session: Session, expected: str, type_: str, data: object, **kw: object) -> None:
    """Append must raise SurfaceError with exactly ``expected`` and change nothing."""
    before = reads(session)
    with pytest.raises(SurfaceError) as info:
        session.append(type_, data, **kw)  # type: ignore[arg-type]
    assert str(info.value) == expected
    assert info.value.session_id == session.id
    assert info.value.seq == session.head + 1
    assert reads(session) == before


# -- the index --------------------------------------------------------------------------------


async def test_append_adds_nodes_in_order(session: Session) -> None:
    a, b = user(session), user(session)
    view = surface(session)
    assert list(view) == [a, b]
    assert view.generation == 0
    assert b in view and 99 not in view
    assert view.position(b) == 1


async def test_replace_swaps_the_span_and_counts_a_generation(session: Session) -> None:
    a, b, c, d = user(session), user(session), user(session), user(session)
    new = checkpoint(session, b, c, (b, c))
    view = surface(session)
    assert list(view) == [a, new, d]
    assert view.generation == 1
    assert messages(session)[1].text == "summary of earlier work"


async def test_single_node_replace(session: Session) -> None:
    a, b = user(session), user(session)
    new = checkpoint(session, a, a, (a,))
    assert list(surface(session)) == [new, b]


async def test_held_surface_never_changes(session: Session) -> None:
    a, b, c = user(session), user(session), user(session)
    held = surface(session)
    user(session)
    checkpoint(session, a, b, (a, b))
    assert list(held) == [a, b, c]
    assert held.position(c) == 2 and held.position(99) is None
    assert held[-1] == c and held[0:2] == (a, b)


async def test_balance_is_tracked_per_position(session: Session) -> None:
    u = user(session)
    call = propose(session, "x", "y")
    rx = answer(session, "x")
    ry = answer(session, "y")
    view = surface(session)
    assert [view.open_calls_before(p) for p in range(5)] == [0, 0, 2, 1, 0]
    assert view.balanced_before(u) and view.balanced_before(call)
    assert not view.balanced_before(rx) and not view.balanced_after(rx)
    assert view.balanced_after(ry)
    with pytest.raises(KeyError):
        view.balanced_after(12345)


async def test_fold_surface_equals_the_live_index(session: Session) -> None:
    a, b = user(session), user(session)
    propose(session, "x")
    first = answer(session, "x", "long")
    pruned = ToolResult(turn=1, step=1, message=Message.tool_result("x", "[pruned]"))
    session.append("tool/result", pruned, surface=Replace(first, first), sources=(first,))
    checkpoint(session, a, b, (a, b))
    rebuilt = fold_surface(list(await session.events()), session_id=session.id)
    assert rebuilt.nodes == session.surface_index.nodes
    assert rebuilt.balances == session.surface_index.balances
    assert rebuilt.generation == session.surface_index.generation == 2


async def test_reopen_rebuilds_the_same_surface() -> None:
    data = MemoryData()
    async with open_store("memory:", data=data) as store:
        session = await store.create(session_id="s1")
        a, b = user(session), user(session)
        propose(session, "x")
        first = answer(session, "x", "long")
        pruned = ToolResult(turn=1, step=1, message=Message.tool_result("x", "short"))
        session.append("tool/result", pruned, surface=Replace(first, first), sources=(first,))
        checkpoint(session, a, b, (a, b))
        before = tuple(messages(session))
        await session.aclose()
    async with open_store("memory:", data=data.restarted()) as store:
        again = await store.open("s1")
        assert list(surface(again)) == list(surface(session))
        assert surface(again).generation == 2
        assert tuple(messages(again)) == before


# -- pruning ----------------------------------------------------------------------------------


async def test_pruning_replaces_one_result_content(session: Session) -> None:
    user(session)
    propose(session, "x")
    first = answer(session, "x", "a very long output")
    pruned = ToolResult(turn=1, step=1, message=Message.tool_result("x", "[pruned]"))
    new = session.append("tool/result", pruned, surface=Replace(first, first), sources=(first,))
    assert surface(session)[-1] == new.seq
    assert messages(session)[-1].tool_results[0].content == "[pruned]"
    assert surface(session).open_calls_before(len(surface(session))) == 0


# -- every refusal, with its exact message ----------------------------------------------------


async def test_refuses_a_start_that_is_not_a_current_node(session: Session) -> None:
    a, b = user(session), user(session)
    checkpoint(session, a, a, (a,))  # a is now shadowed
    refused(
        session,
        "session 's1', seq 3: Replace(0, 1): seq 0 is not a current surface node",
        "user/message",
        UserMessage(message=Message.user("s")),
        surface=Replace(a, b),
        sources=(a, b),
    )


async def test_refuses_an_end_that_is_not_a_node_at_all(session: Session) -> None:
    a = user(session)
    refused(
        session,
        "session 's1', seq 1: Replace(0, 7): seq 7 is not a current surface node",
        "user/message",
        UserMessage(message=Message.user("s")),
        surface=Replace(a, 7),
        sources=(a,),
    )


async def test_refuses_a_non_surface_event_as_an_end(session: Session) -> None:
    a = user(session)
    t = session.append("turn/start", TurnStart(turn=1)).seq
    refused(
        session,
        "session 's1', seq 2: Replace(0, 1): seq 1 is not a current surface node",
        "user/message",
        UserMessage(message=Message.user("s")),
        surface=Replace(a, t),
        sources=(a, t),
    )


async def test_refuses_start_after_end(session: Session) -> None:
    a, b = user(session), user(session)
    refused(
        session,
        "session 's1', seq 2: Replace(1, 0): start comes after end on the surface",
        "user/message",
        UserMessage(message=Message.user("s")),
        surface=Replace(b, a),
        sources=(a, b),
    )


async def test_refuses_start_after_end_in_surface_order_not_seq_order(session: Session) -> None:
    a, b, c = user(session), user(session), user(session)
    new = checkpoint(session, a, b, (a, b))  # surface: [new(3), c(2)]: seq order != position
    refused(
        session,
        "session 's1', seq 4: Replace(2, 3): start comes after end on the surface",
        "user/message",
        UserMessage(message=Message.user("s")),
        surface=Replace(c, new),
        sources=(c, new),
    )


async def test_refuses_sources_that_miss_a_shadowed_node(session: Session) -> None:
    a, _, c = user(session), user(session), user(session)
    refused(
        session,
        "session 's1', seq 3: Replace(0, 2): sources do not cover shadowed node(s) [1]",
        "user/message",
        UserMessage(message=Message.user("s")),
        surface=Replace(a, c),
        sources=(a, c),
    )


async def test_refuses_a_span_that_ends_between_a_call_and_its_result(session: Session) -> None:
    u = user(session)
    call = propose(session, "x")
    answer(session, "x")
    refused(
        session,
        "session 's1', seq 3: Replace(0, 1): would separate a tool call from its result "
        "(0 call(s) open before the span, 1 after it)",
        "user/message",
        UserMessage(message=Message.user("s")),
        surface=Replace(u, call),
        sources=(u, call),
    )


async def test_refuses_a_span_that_starts_between_a_call_and_its_result(
    session: Session,
) -> None:
    propose(session, "x", "y")
    rx = answer(session, "x")
    ry = answer(session, "y")
    refused(
        session,
        "session 's1', seq 3: Replace(1, 2): would separate a tool call from its result "
        "(2 call(s) open before the span, 0 after it)",
        "user/message",
        UserMessage(message=Message.user("s")),
        surface=Replace(rx, ry),
        sources=(rx, ry),
    )


async def test_refuses_a_span_inside_a_step_with_open_calls(session: Session) -> None:
    propose(session, "x", "y", "z")
    rx, ry = answer(session, "x"), answer(session, "y")
    refused(
        session,
        "session 's1', seq 3: Replace(1, 2): would separate a tool call from its result "
        "(3 call(s) open before the span, 1 after it)",
        "user/message",
        UserMessage(message=Message.user("s")),
        surface=Replace(rx, ry),
        sources=(rx, ry),
    )


async def test_refuses_a_replacing_message_with_tool_calls(session: Session) -> None:
    a, b = user(session), user(session)
    call = ToolCallPart(id="x", name="read", arguments="{}")
    data = AssistantMessage(turn=1, step=1, message=Message.assistant("s", tool_calls=(call,)))
    refused(
        session,
        "session 's1', seq 2: Replace(0, 1): a replacing assistant/message must not carry "
        "tool calls or tool results",
        "assistant/message",
        data,
        surface=Replace(a, b),
        sources=(a, b),
    )


async def test_refuses_a_tool_result_replacing_two_nodes(session: Session) -> None:
    propose(session, "x", "y")
    rx, ry = answer(session, "x"), answer(session, "y")
    data = ToolResult(turn=1, step=1, message=Message.tool_result("x", "[pruned]"))
    refused(
        session,
        "session 's1', seq 3: Replace(1, 2): a tool/result replacement must shadow exactly "
        "one node, not 2",
        "tool/result",
        data,
        surface=Replace(rx, ry),
        sources=(rx, ry),
    )


async def test_refuses_a_tool_result_replacing_a_user_message(session: Session) -> None:
    a = user(session)
    data = ToolResult(turn=1, step=1, message=Message.tool_result("x", "[pruned]"))
    refused(
        session,
        "session 's1', seq 1: Replace(0, 0): a tool/result replacement must shadow a "
        "tool/result; seq 0 is not one",
        "tool/result",
        data,
        surface=Replace(a, a),
        sources=(a,),
    )


@pytest.mark.parametrize(
    "change",
    ["call_id", "is_error", "step", "source", "error", "extra-part"],
)
async def test_refuses_a_pruning_that_changes_more_than_content(
    session: Session, change: str
) -> None:
    propose(session, "x")
    first = answer(session, "x", "long")
    message = Message.tool_result("x", "[pruned]")
    step = 1
    error = None
    if change == "call_id":
        message = Message.tool_result("other", "[pruned]")
    elif change == "is_error":
        message = Message.tool_result("x", "[pruned]", is_error=True)
    elif change == "step":
        step = 2
    elif change == "source":
        message = Message.tool_result("x", "[pruned]", source="compaction")
    elif change == "error":
        error = ToolError(name="E", code="E")
    else:
        part = ToolResultPart(call_id="x", content="[pruned]")
        message = Message(id="m", role="tool", content=(part, TextPart(text="more")))
    data = ToolResult(turn=1, step=step, message=message, error=error)
    refused(
        session,
        "session 's1', seq 2: Replace(1, 1): a tool/result replacement may change only the "
        "content of the result it shadows (seq 1)",
        "tool/result",
        data,
        surface=Replace(first, first),
        sources=(first,),
    )
