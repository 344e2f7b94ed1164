"""messages(session): derivation from the surface, O(1) immutable views, history at a seq."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventlog import (
    APPEND,
    AssistantMessage,
    Message,
    Replace,
    Session,
    StepStart,
    ToolCall,
    ToolCallPart,
    ToolResult,
    TurnStart,
    UserMessage,
    ValidationError,
    open_store,
)
from projections import MessagesView, messages

pytestmark = pytest.mark.anyio


def user(session: Session, text: str) -> int:
    data = UserMessage(message=Message.user(text, id=text))
    return session.append("user/message", data, surface=APPEND).seq


def assistant(session: Session, text: str, *calls: str) -> int:
    parts = tuple(ToolCallPart(id=c, name="read", arguments="{}") for c in calls)
    message = Message.assistant(text, tool_calls=parts, id=f"a-{text}")
    data = AssistantMessage(turn=1, step=1, message=message)
    return session.append("assistant/message", data, surface=APPEND).seq


def answer(session: Session, call_id: str) -> int:
    data = ToolResult(turn=1, step=1, message=Message.tool_result(call_id, "out", id=call_id))
    return session.append("tool/result", data, surface=APPEND).seq


def ids(view: MessagesView) -> list[str]:
    return [m.id for m in view]


async def test_surface_events_derive_in_order_and_other_events_to_nothing(
    session: Session,
) -> None:
    session.append("turn/start", TurnStart(turn=1))
    user(session, "u1")
    session.append("step/start", StepStart(turn=1, step=1))
    assistant(session, "t", "c1")
    session.append("tool/call", ToolCall(turn=1, step=1, call_id="c1", name="read", arguments="{}"))
    answer(session, "c1")
    assert ids(messages(session)) == ["u1", "a-t", "c1"]


async def test_an_empty_assistant_message_derives_to_nothing(session: Session) -> None:
    user(session, "u1")
    empty = Message(id="empty", role="assistant", content=())
    data = AssistantMessage(turn=1, step=1, message=empty, finish="max-tokens")
    session.append("assistant/message", data, surface=APPEND)
    user(session, "u2")
    assert ids(messages(session)) == ["u1", "u2"]
    assert ids(messages(session, at=1)) == ["u1"]


async def test_messages_are_the_logged_objects_not_copies(session: Session) -> None:
    seq = user(session, "u1")
    assert messages(session)[0] is (await session.events())[seq].data.message


async def test_unchanged_surface_returns_the_same_view(session: Session) -> None:
    user(session, "u1")
    first = messages(session)
    assert messages(session) is first
    session.append("turn/start", TurnStart(turn=1))  # not a surface event
    assert messages(session) is first


async def test_a_held_view_never_changes(session: Session) -> None:
    a = user(session, "u1")
    b = user(session, "u2")
    held = messages(session)
    user(session, "u3")
    assert ids(messages(session)) == ["u1", "u2", "u3"]
    summary = UserMessage(message=Message.user("summary", id="sum"))
    session.append("user/message", summary, surface=Replace(a, b), sources=(a, b))
    assert ids(messages(session)) == ["sum", "u3"]
    assert ids(held) == ["u1", "u2"]
    assert len(held) == 2


async def test_a_replace_rebuilds_and_later_appends_extend_again(session: Session) -> None:
    a = user(session, "u1")
    user(session, "u2")
    summary = UserMessage(message=Message.user("summary", id="sum"))
    session.append("user/message", summary, surface=Replace(a, a), sources=(a,))
    after_replace = messages(session)
    user(session, "u3")
    assert ids(after_replace) == ["sum", "u2"]
    assert ids(messages(session)) == ["sum", "u2", "u3"]


async def test_replace_by_an_empty_assistant_message_removes_the_span(session: Session) -> None:
    a = user(session, "u1")
    b = user(session, "u2")
    user(session, "u3")
    empty = AssistantMessage(turn=1, step=1, message=Message(id="e", role="assistant", content=()))
    session.append("assistant/message", empty, surface=Replace(a, b), sources=(a, b))
    assert ids(messages(session)) == ["u3"]


async def test_view_is_a_sequence(session: Session) -> None:
    for text in ("u1", "u2", "u3"):
        user(session, text)
    view = messages(session)
    assert len(view) == 3
    assert view[0].id == "u1" and view[-1].id == "u3"
    assert [m.id for m in view[1:]] == ["u2", "u3"]
    assert isinstance(view[1:], tuple)
    assert view == list(view)
    assert view == tuple(view)
    assert view != [view[0]]
    with pytest.raises(IndexError):
        view[3]
    with pytest.raises(IndexError):
        view[-4]
    assert repr(view) == "<MessagesView 3 messages>"
    with pytest.raises(TypeError):
        hash(view)


async def test_history_at_a_seq_is_what_the_model_saw_then(session: Session) -> None:
    a = user(session, "u1")  # 0
    assistant(session, "t", "c1")  # 1
    answer(session, "c1")  # 2
    summary = UserMessage(message=Message.user("summary", id="sum"))
    session.append("user/message", summary, surface=Replace(a, 2), sources=(a, 1, 2))  # 3
    user(session, "u2")  # 4
    assert ids(messages(session, at=-1)) == []
    assert ids(messages(session, at=0)) == ["u1"]
    assert ids(messages(session, at=2)) == ["u1", "a-t", "c1"]
    assert ids(messages(session, at=3)) == ["sum"]
    assert ids(messages(session, 4)) == ["sum", "u2"] == ids(messages(session))


@pytest.mark.parametrize("at", [5, -2])
async def test_history_at_a_seq_outside_the_log_is_refused(session: Session, at: int) -> None:
    user(session, "u1")
    with pytest.raises(ValidationError) as info:
        messages(session, at=at)
    assert str(info.value) == f"session 's1': at={at} is not a seq of the log (-1..0)"
    assert info.value.session_id == "s1"


async def test_empty_session_has_no_messages(session: Session) -> None:
    assert len(messages(session)) == 0
    assert list(messages(session, at=-1)) == []


async def test_the_window_reads_one_committed_event(session: Session) -> None:
    # The messages projection reads each new surface event through the window.
    seq = user(session, "u1")
    assert session.window().event(seq) is (await session.events())[seq]
    for bad in (-1, seq + 1):
        with pytest.raises(IndexError):
            session.window().event(bad)


def answered_with_context(session: Session, call_id: str, context: str | None) -> int:
    note = None if context is None else Message.user(context, id=f"ctx-{call_id}")
    message = Message.tool_result(call_id, "out", id=call_id)
    data = ToolResult(turn=1, step=1, message=message, context=note)
    return session.append("tool/result", data, surface=APPEND).seq


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.lists(st.tuples(st.booleans(), st.booleans()), max_size=3), min_size=1, max_size=4
    )
)
def test_contexts_follow_their_run_of_results_live_and_rebuilt(
    steps: list[list[tuple[bool, bool]]],
) -> None:
    """Steps of calls whose results may carry a context, the view read at random moments: the
    contexts follow the step's last result in the results' order, the live view always equals
    the fold of the log so far, and a view taken mid-run never changes afterwards."""

    async def scenario() -> None:
        async with open_store("memory:") as store:
            session = await store.create(session_id="p")
            expected: list[str] = []
            taken: list[tuple[MessagesView, list[str]]] = []
            for n, calls in enumerate(steps):
                user(session, f"u{n}")
                expected.append(f"u{n}")
                call_ids = [f"c{n}-{k}" for k in range(len(calls))]
                assistant(session, f"s{n}", *call_ids)
                expected.append(f"a-s{n}")
                contexts: list[str] = []
                for call_id, (has_context, read) in zip(call_ids, calls, strict=True):
                    answered_with_context(session, call_id, "note" if has_context else None)
                    expected.append(call_id)
                    contexts += [f"ctx-{call_id}"] if has_context else []
                    if read:  # a view mid-run ends with the contexts so far
                        view = messages(session)
                        assert ids(view) == expected + contexts
                        taken.append((view, expected + contexts))
                expected += contexts
            user(session, "last")
            expected.append("last")
            assert ids(messages(session)) == expected
            assert ids(messages(session, at=session.head)) == expected
            for view, then in taken:
                assert ids(view) == then

    anyio.run(scenario)
