"""to_openai / to_anthropic: exact shapes, and provider-valid output for any balanced log.

``check_openai`` and ``check_anthropic`` encode the rules those APIs enforce on a ``messages``
list (roles, block shapes, every tool call answered once by id, right after it, in order).
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventlog import (
    APPEND,
    AssistantMessage,
    Message,
    ReasoningPart,
    Session,
    StepEnd,
    StepStart,
    TextPart,
    ToolCall,
    ToolCallPart,
    ToolOutcome,
    ToolResult,
    ToolResultPart,
    TurnEnd,
    TurnStart,
    UserMessage,
    ValidationError,
    open_store,
)
from projections import messages, to_anthropic, to_openai
from projections._formats import tool_input

pytestmark = pytest.mark.anyio


# -- what the providers accept ----------------------------------------------------------------


def check_openai(out: list[dict[str, Any]]) -> None:
    """Fail unless ``out`` is a Chat Completions ``messages`` list OpenAI accepts."""
    waiting: list[str] = []  # call ids of the last assistant message not yet answered
    for position, message in enumerate(out):
        role = message["role"]
        where = f"message {position}"
        if role == "tool":
            assert set(message) == {"role", "tool_call_id", "content"}, where
            assert isinstance(message["content"], str), where
            assert waiting and message["tool_call_id"] == waiting[0], f"{where}: unexpected result"
            waiting.pop(0)
            continue
        assert not waiting, f"{where}: calls {waiting} were not answered before it"
        if role == "user":
            assert set(message) == {"role", "content"}, where
            content = message["content"]
            assert isinstance(content, str) or all(
                set(part) == {"type", "text"} and part["type"] == "text" for part in content
            ), where
        else:
            assert role == "assistant", where
            assert set(message) <= {"role", "content", "tool_calls"}, where
            calls = message.get("tool_calls", [])
            assert message["content"] is None or isinstance(message["content"], str), where
            assert message["content"] or calls, f"{where}: empty assistant message"
            assert "tool_calls" not in message or calls, f"{where}: empty tool_calls"
            for call in calls:
                assert set(call) == {"id", "type", "function"} and call["type"] == "function"
                assert set(call["function"]) == {"name", "arguments"}
                assert isinstance(call["function"]["arguments"], str)
            waiting = [call["id"] for call in calls]
            assert len(set(waiting)) == len(waiting), f"{where}: duplicate call ids"
    assert not waiting, f"calls {waiting} were never answered"


def check_anthropic(out: list[dict[str, Any]]) -> None:
    """Fail unless ``out`` is a Messages API ``messages`` list Anthropic accepts."""
    waiting: list[str] = []
    for position, message in enumerate(out):
        where = f"message {position}"
        assert set(message) == {"role", "content"}, where
        role, blocks = message["role"], message["content"]
        assert blocks, f"{where}: empty content"
        if position:
            assert role != out[position - 1]["role"], f"{where}: roles must alternate"
        results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
        assert results == waiting, f"{where}: answers {results}, calls were {waiting}"
        kinds = [b["type"] for b in blocks]
        assert kinds[: len(results)] == ["tool_result"] * len(results), f"{where}: order"
        waiting = []
        for block in blocks:
            _check_anthropic_block(role, block, where)
            if block["type"] == "tool_use":
                waiting.append(block["id"])
    assert not waiting, f"calls {waiting} were never answered"


def _check_anthropic_block(role: str, block: dict[str, Any], where: str) -> None:
    kind = block["type"]
    allowed = {"text", "tool_result"} if role == "user" else {"text", "thinking", "tool_use"}
    assert role in ("user", "assistant") and kind in allowed, f"{where}: {kind} in {role}"
    if kind == "text":
        assert set(block) == {"type", "text"} and block["text"], where
    elif kind == "thinking":
        assert set(block) == {"type", "thinking", "signature"} and block["signature"], where
    elif kind == "tool_use":
        assert set(block) == {"type", "id", "name", "input"}, where
        assert isinstance(block["input"], dict), where
    else:
        assert set(block) <= {"type", "tool_use_id", "content", "is_error"}, where
        assert isinstance(block["is_error"], bool), where
        assert isinstance(block.get("content", ""), str), where


# -- exact shapes -----------------------------------------------------------------------------

CALL_A = ToolCallPart(id="a", name="read", arguments='{"path": "x.py"}')
CALL_B = ToolCallPart(id="b", name="ls", arguments="")
CONVERSATION = (
    Message.user("fix it", id="u1"),
    Message(
        id="m1",
        role="assistant",
        content=(
            ReasoningPart(text="think", signature="sig"),
            TextPart(text="Reading."),
            CALL_A,
            CALL_B,
        ),
    ),
    Message.tool_result("a", "print(1)", id="r1"),
    Message.tool_result("b", "", is_error=True, id="r2"),
    Message.user("also this", id="u2"),
    Message(id="m2", role="assistant", content=(ReasoningPart(text="unsigned"),)),
    Message.assistant("Done.", id="m3"),
)


def test_openai_shapes() -> None:
    assert to_openai(CONVERSATION) == [
        {"role": "user", "content": "fix it"},
        {
            "role": "assistant",
            "content": "Reading.",
            "tool_calls": [
                {
                    "id": "a",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path": "x.py"}'},
                },
                {"id": "b", "type": "function", "function": {"name": "ls", "arguments": ""}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "print(1)"},
        {"role": "tool", "tool_call_id": "b", "content": ""},
        {"role": "user", "content": "also this"},
        {"role": "assistant", "content": "Done."},
    ]
    check_openai(to_openai(CONVERSATION))


def test_anthropic_shapes() -> None:
    assert to_anthropic(CONVERSATION) == [
        {"role": "user", "content": [{"type": "text", "text": "fix it"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "think", "signature": "sig"},
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "a", "name": "read", "input": {"path": "x.py"}},
                {"type": "tool_use", "id": "b", "name": "ls", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "a",
                    "content": "print(1)",
                    "is_error": False,
                },
                {"type": "tool_result", "tool_use_id": "b", "is_error": True},
                {"type": "text", "text": "also this"},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
    ]
    check_anthropic(to_anthropic(CONVERSATION))


def test_assistant_tool_calls_without_text_have_empty_content_for_openai() -> None:
    # "", not null: OpenAI takes both, llama.cpp's server refuses null (HTTP 500).
    message = Message.assistant(tool_calls=(CALL_A,), id="m")
    assert to_openai([message])[0]["content"] == ""


def test_several_user_text_parts_become_openai_content_parts() -> None:
    message = Message(id="u", role="user", content=(TextPart(text="a"), TextPart(text="b")))
    assert to_openai([message]) == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        }
    ]


def test_consecutive_user_messages_merge_for_anthropic_only() -> None:
    pair = [Message.user("a", id="1"), Message.user("b", id="2")]
    assert to_anthropic(pair) == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    ]
    assert len(to_openai(pair)) == 2


def test_results_open_the_user_message_even_when_a_user_text_came_first() -> None:
    # A user message that slipped between the calls and their results still yields a valid
    # request: the results move ahead of the text inside the merged user message.
    out = to_anthropic(
        [
            Message.assistant(tool_calls=(CALL_A,), id="m"),
            Message.user("wait", id="u"),
            Message.tool_result("a", "ok", id="r"),
        ]
    )
    assert [b["type"] for b in out[1]["content"]] == ["tool_result", "text"]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"a": [1, 2]}', {"a": [1, 2]}),
        ("", {}),
        ("  ", {}),
        ("[1, 2]", {"arguments": "[1, 2]"}),
        ('{"a": ', {"arguments": '{"a": '}),
    ],
)
def test_tool_input(arguments: str, expected: dict[str, Any]) -> None:
    assert tool_input(ToolCallPart(id="a", name="t", arguments=arguments)) == expected


@pytest.mark.parametrize("convert", [to_openai, to_anthropic])
@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            Message(id="u", role="user", content=(CALL_A,)),
            "message 'u' (user): a user message cannot carry a ToolCallPart",
        ),
        (
            Message(id="m", role="assistant", content=(ToolResultPart(call_id="a", content=""),)),
            "message 'm' (assistant): a assistant message cannot carry a ToolResultPart",
        ),
        (
            Message(id="t", role="tool", content=(TextPart(text="x"),)),
            "message 't' (tool): a tool message must carry exactly one tool result",
        ),
    ],
)
def test_parts_a_role_cannot_carry_are_refused(
    convert: Any, message: Message, expected: str
) -> None:
    with pytest.raises(ValidationError) as info:
        convert([message])
    assert str(info.value) == expected


# -- provider-valid whenever the log is balanced ----------------------------------------------
# Everything random is drawn up front (seeds, not st.randoms): a draw inside the async body
# would raise hypothesis's StopTest inside the event loop.

steps = st.lists(
    st.tuples(
        st.integers(0, 3),  # tool calls proposed
        st.sampled_from(["", "text"]),
        st.sampled_from([None, "", "sig"]),  # no reasoning, unsigned, signed
        st.integers(0, 2**32),  # seeds the execution order of tool/call and tool/outcome
        st.booleans(),  # a user message (steer) before the step
    ),
    min_size=1,
    max_size=6,
)


@given(steps=steps)
async def test_balanced_logs_convert_to_valid_requests(
    steps: list[tuple[int, str, str | None, int, bool]],
) -> None:
    async with open_store("memory:") as store:
        session = await store.create()
        session.append("turn/start", TurnStart(turn=1))
        session.append("user/message", UserMessage(message=Message.user("go")), surface=APPEND)
        expected_pairs: list[str] = []
        for number, (ncalls, text, reasoning, seed, steer) in enumerate(steps, start=1):
            if steer:
                data = UserMessage(message=Message.user(f"steer {number}"))
                session.append("user/message", data, surface=APPEND)
            session.append("step/start", StepStart(turn=1, step=number))
            ids = [f"c{number}-{i}" for i in range(ncalls)]
            expected_pairs += ids
            _run_step(session, number, ids, text, reasoning, random.Random(seed))
            session.append("step/end", StepEnd(turn=1, step=number))
        session.append("turn/end", TurnEnd(turn=1, reason="completed"))
        history = messages(session)
        check_openai(to_openai(history))
        check_anthropic(to_anthropic(history))
        answered = [m.tool_results[0].call_id for m in history if m.role == "tool"]
        assert answered == expected_pairs


def _run_step(
    session: Session,
    step: int,
    ids: list[str],
    text: str,
    reasoning: str | None,
    rng: random.Random,
) -> None:
    parts: list[Any] = []
    if reasoning is not None:
        parts.append(ReasoningPart(text="hmm", signature=reasoning or None))
    if text:
        parts.append(TextPart(text=text))
    parts += [ToolCallPart(id=i, name="t", arguments='{"n": 1}') for i in ids]
    message = Message(id=f"m{step}", role="assistant", content=tuple(parts))
    session.append(
        "assistant/message", AssistantMessage(turn=1, step=step, message=message), surface=APPEND
    )
    # Bodies run in any order (tool/call, then tool/outcome when one finishes early); results
    # are committed in the model's order, each after its own tool/call.
    started: set[str] = set()
    execution = [("call", i) for i in ids] + [("outcome", i) for i in ids if rng.random() < 0.5]
    rng.shuffle(execution)
    pending = list(ids)
    for kind, call_id in execution:
        if kind == "call":
            session.append(
                "tool/call", ToolCall(turn=1, step=step, call_id=call_id, name="t", arguments="{}")
            )
            started.add(call_id)
        elif call_id in started:
            result = Message.tool_result(call_id, "early")
            session.append(
                "tool/outcome", ToolOutcome(turn=1, step=step, call_id=call_id, result=result)
            )
        while pending and pending[0] in started and rng.random() < 0.7:
            _result(session, step, pending.pop(0))
    for call_id in pending:
        _result(session, step, call_id)


def _result(session: Session, step: int, call_id: str) -> None:
    data = ToolResult(turn=1, step=step, message=Message.tool_result(call_id, f"out {call_id}"))
    session.append("tool/result", data, surface=APPEND)
