"""``EventlogSession`` against the SDK's own ``SQLiteSession``: the same operations give the
same ``get_items`` results, and the items live on as core events that the rest of eventlog reads.
"""

from __future__ import annotations

import re
import textwrap
import uuid
from pathlib import Path
from typing import Any

import msgspec
import pytest
from agents import Runner, SQLiteSession, function_tool
from agents.memory import SessionSettings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.integrations.openai_agents import (
    EventlogSession,
    openai_agents_types,
    register_openai_agents_types,
)
from eventlog import EventTypes, ValidationError, open_store
from projections import messages
from recovery import not_started_text, scan
from tests.llm_server import LLMServer
from tests.openai_agents_children.support import client_for, completion, make_agent

pytestmark = pytest.mark.anyio

# Items of every kind the SDK stores: some with a core equivalent, some without.
ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "hello"},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "two"}]},
    {"role": "system", "content": "be brief"},
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "hi", "annotations": []}],
    },
    {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "hm"}]},
    {
        "type": "function_call_output",
        "call_id": "c2",
        "output": [{"type": "input_text", "text": "x"}],
    },
]

operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(st.sampled_from(range(len(ITEMS))), max_size=4)),
        st.tuples(st.just("pop"), st.none()),
        st.tuples(st.just("clear"), st.none()),
        st.tuples(st.just("get"), st.one_of(st.none(), st.integers(0, 5))),
    ),
    max_size=12,
)


async def apply(session: Any, operation: tuple[str, Any]) -> Any:
    kind, argument = operation
    if kind == "add":
        return await session.add_items([dict(ITEMS[i]) for i in argument])
    if kind == "pop":
        return await session.pop_item()
    if kind == "clear":
        return await session.clear_session()
    return await session.get_items(argument)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(script=operations)
async def test_the_four_methods_agree_with_sqlite_session(
    tmp_path: Path, script: list[Any]
) -> None:
    # The same operations on the SDK's SQLiteSession and on EventlogSession (a fresh pair).
    name = f"s{uuid.uuid4().hex}"  # examples share tmp_path: a fresh session each
    reference = SQLiteSession(name, tmp_path / "sdk.db")
    async with open_store(
        f"sqlite:///{tmp_path / 'eventlog.db'}", types=openai_agents_types()
    ) as store:
        session = await EventlogSession.open(store, name)
        for operation in script:
            # Every answer is the same: pop's item, get's list (with and without a limit).
            assert await apply(session, operation) == await apply(reference, operation)
            assert await session.get_items() == await reference.get_items()
        expected = await reference.get_items()
        await session.log.aclose()
        # Reopened in a new store, the log gives back the same items.
    async with open_store(
        f"sqlite:///{tmp_path / 'eventlog.db'}", types=openai_agents_types()
    ) as store:
        again = await EventlogSession.open(store, name)
        assert await again.get_items() == expected
        await again.log.aclose()
    reference.close()


async def test_session_settings_limit_is_the_default(tmp_path: Path) -> None:
    async with open_store("memory:", types=openai_agents_types()) as store:
        session = await EventlogSession.open(store, "s", session_settings=SessionSettings(limit=2))
        await session.add_items([dict(item) for item in ITEMS[:4]])
        # The latest two, oldest first; an explicit limit overrides.
        assert await session.get_items() == ITEMS[2:4]
        assert await session.get_items(limit=1) == ITEMS[3:4]


async def test_pop_and_clear_are_events_nothing_is_deleted() -> None:
    async with open_store("memory:", types=openai_agents_types()) as store:
        session = await EventlogSession.open(store, "s")
        await session.add_items([dict(ITEMS[0]), dict(ITEMS[3])])
        head = session.log.head
        # pop returns the latest item and logs it; clear empties the list, not the log.
        assert await session.pop_item() == ITEMS[3]
        await session.clear_session()
        assert await session.get_items() == []
        types = [e.type for e in await session.log.events(head + 1)]
        assert types[0] == "openai_agents/pop" and types[-1] == "openai_agents/clear"
        assert [e.type for e in await session.log.events()][: head + 1].count("user/message") == 1
        assert await session.pop_item() is None


async def test_a_runner_turn_is_core_events_and_the_same_items(tmp_path: Path) -> None:
    @function_tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    replies = [
        completion(calls=[("call_1", "weather", {"city": "Oslo"})]),
        completion(text="Sunny."),
    ]
    with LLMServer(*replies, *replies) as server:
        client = client_for(server.url)
        agent = make_agent(client, [weather])
        # The same turn through the real Runner, on the SDK's session and on eventlog's.
        reference = SQLiteSession("r", tmp_path / "sdk.db")
        await Runner.run(agent, "Weather in Oslo?", session=reference)
        async with open_store(
            f"sqlite:///{tmp_path / 'e.db'}", types=openai_agents_types()
        ) as store:
            session = await EventlogSession.open(store, "r")
            await Runner.run(agent, "Weather in Oslo?", session=session, hooks=session.hooks)
            assert await session.get_items() == await reference.get_items()
            # The core record: a balanced turn, the call logged before its result.
            types = [
                e.type
                for e in await session.log.events()
                if not e.type.startswith("openai_agents/")
            ]
            assert types == [
                "turn/start", "step/start", "user/message", "assistant/message", "tool/call",
                "tool/outcome", "tool/result", "step/end", "step/start", "assistant/message",
                "step/end", "turn/end",
            ]  # fmt: skip
            assert not scan(session.log).needs_repair
            assert [m.role for m in messages(session.log)] == [
                "user",
                "assistant",
                "tool",
                "assistant",
            ]
        reference.close()
        await client.close()


def _readme_block() -> str:
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    match = re.search(r"<!-- openai-agents:.*?-->\s*```python\n(.*?)```", text, re.S)
    assert match, "README has no OpenAI Agents SDK block"
    return match.group(1)


async def test_the_readme_block_switches_a_runner_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = _readme_block()
    assert len([line for line in code.splitlines() if line.strip()]) == 4
    sent: list[str] = []

    @function_tool
    def send_email(to: str) -> str:
        """Send the report to someone."""
        sent.append(to)
        return f"sent to {to}"

    # The block as written, inside a coroutine, with an agent of its own on the loopback server.
    replies = [
        completion(calls=[("call_1", "send_email", {"to": "bob"})]),
        completion(text="Sent."),
    ]
    with LLMServer(*replies) as server:
        client = client_for(server.url)
        source = "async def block():\n" + textwrap.indent(code, "    ") + "    return result\n"
        namespace: dict[str, Any] = {
            "open_store": open_store,
            "Runner": Runner,
            "agent": make_agent(client, [send_email]),
        }
        exec(compile(source, "README.md", "exec"), namespace)
        monkeypatch.chdir(tmp_path)  # the block's relative sessions.db
        result = await namespace["block"]()
        await client.close()
    assert result.final_output == "Sent." and sent == ["bob"]
    # The session is on record: a balanced turn with the call logged before its result.
    async with open_store("sqlite:///sessions.db", types=openai_agents_types()) as store:
        session = await EventlogSession.open(store, "conversation-1")
        assert "tool/call" in [e.type for e in await session.log.events()]
        assert not scan(session.log).needs_repair
        assert (await session.get_items())[-1]["content"][0]["text"] == "Sent."
        await session.log.aclose()


async def test_a_reply_logged_by_the_hooks_and_never_added_is_answered_not_started(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'e.db'}"
    call = {"type": "function_call", "call_id": "c9", "name": "deploy", "arguments": "{}"}
    async with open_store(url, types=openai_agents_types()) as store:
        session = await EventlogSession.open(store, "s")
        await session.add_items([{"role": "user", "content": "deploy it"}])
        # The hooks log the model's reply; the process stops before any tool starts.
        assert session.log_model_output([call]) is not None
        await session.log.flush()
        await session.log.aclose()
    async with open_store(url, types=openai_agents_types()) as store:
        # Reopened: the call is answered, saying it never ran; the turn is closed.
        again = await EventlogSession.open(store, "s")
        items = await again.get_items()
        assert items[-1] == {
            "type": "function_call_output",
            "call_id": "c9",
            "output": not_started_text("deploy", "c9"),
        }
        assert [e.type for e in await again.log.events()][-2:] == ["step/end", "turn/end"]
        assert not scan(again.log).needs_repair
        await again.log.aclose()


async def test_a_call_an_app_added_without_output_is_left_as_it_is() -> None:
    async with open_store("memory:", types=openai_agents_types()) as store:
        session = await EventlogSession.open(store, "s")
        call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
        await session.add_items([{"role": "user", "content": "hi"}, call])
        await session.log.aclose()
        # Not a crash: the app's own history, given back as it was added.
        again = await EventlogSession.open(store, "s")
        assert await again.get_items() == [{"role": "user", "content": "hi"}, call]
        await again.log.aclose()


def test_the_types_refuse_a_name_taken_by_another_payload() -> None:
    # Registering twice is harmless; a clash with an app's own payload is named.
    types = register_openai_agents_types(openai_agents_types())
    assert types.get("openai_agents/items") is not None
    clashing = EventTypes()
    clashing.register("openai_agents/pop", Note)
    with pytest.raises(ValidationError, match="registered with Note, not the OpenAI Agents"):
        register_openai_agents_types(clashing)


class Note(msgspec.Struct, frozen=True, kw_only=True):
    text: str
