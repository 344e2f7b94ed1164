"""``EventlogHistory`` under pydantic-ai's own ``Agent.run``: the history a run leaves is the
history a reopened store gives back, message for message, and it lives on as core events the
rest of eventlog reads.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.toolsets import FunctionToolset

from agent.integrations.pydantic_ai import (
    EventlogHistory,
    pydantic_ai_types,
    register_pydantic_ai_types,
)
from eventlog import EventTypes, ValidationError, open_store
from projections import messages as surface_messages
from recovery import scan
from tests.pg_children.server import fresh_schema, store_url
from tests.pydantic_ai_children.support import CALLS, make_agent, make_tools

pytestmark = pytest.mark.anyio


def dumped(messages: list[ModelMessage]) -> bytes:
    return ModelMessagesTypeAdapter.dump_json(messages)


def core_types(history: EventlogHistory) -> list[str]:
    return [e.type for e in history.log.window() if not e.type.startswith("pydantic_ai/")]


async def test_a_history_reopened_in_a_new_store_is_the_runs_messages(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    marker = tmp_path / "effects.txt"
    async with open_store(url, types=pydantic_ai_types()) as store:
        history = await EventlogHistory.open(store, "c")
        assert history.messages() == [] and not history.pending
        tools = history.durable(make_tools(marker))
        result = await make_agent().run("Pay bob 10.", message_history=[], toolsets=[tools])
        await history.record(result)
        # The core record: a balanced turn, each call logged before its body, then answered
        # in the model's order; one step per model call.
        assert core_types(history) == [
            "turn/start", "step/start", "user/message", "assistant/message",
            "tool/call", "tool/outcome", "tool/call", "tool/outcome", "tool/call", "tool/outcome",
            "tool/result", "tool/result", "tool/result", "step/end",
            "step/start", "assistant/message", "step/end", "turn/end",
        ]  # fmt: skip
        assert not scan(history.log).needs_repair
        assert [m.role for m in surface_messages(history.log)] == [
            "user", "assistant", "tool", "tool", "tool", "assistant",
        ]  # fmt: skip
    # A new store object on the same file: the exact messages, equal and dumped alike.
    async with open_store(url, types=pydantic_ai_types()) as store:
        again = await EventlogHistory.open(store, "c")
        assert again.messages() == result.all_messages()
        assert dumped(again.messages()) == dumped(result.all_messages())
        assert not again.pending
        await again.log.aclose()
    assert marker.read_text() == "lookup\ntransfer\nnotify\n"


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema() as name:
        yield name


async def test_the_history_round_trips_on_postgresql(schema: str, tmp_path: Path) -> None:
    marker = tmp_path / "effects.txt"
    async with open_store(store_url(schema), types=pydantic_ai_types()) as store:
        history = await EventlogHistory.open(store, "pg")
        toolsets = [history.durable(make_tools(marker))]
        run = await make_agent().run("Pay bob 10.", message_history=[], toolsets=toolsets)
        await history.record(run)
    async with open_store(store_url(schema), types=pydantic_ai_types()) as store:
        again = await EventlogHistory.open(store, "pg")
        assert dumped(again.messages()) == dumped(run.all_messages())
        assert "tool/call" in core_types(again) and not scan(again.log).needs_repair
        await again.log.aclose()


async def test_test_model_runs_round_trip_with_every_tool_and_structured_args() -> None:
    tools: FunctionToolset[Any] = FunctionToolset()

    @tools.tool_plain
    def area(width: float, height: float, unit: str = "m") -> dict[str, Any]:
        """The area of a rectangle."""
        return {"area": width * height, "unit": unit}

    agent = Agent(TestModel())
    async with open_store("memory:", types=pydantic_ai_types()) as store:
        history = await EventlogHistory.open(store, "t")
        for prompt in ("first", "second"):
            run = await agent.run(
                prompt, message_history=history.messages(), toolsets=[history.durable(tools)]
            )
            await history.record(run)
        await history.log.aclose()
        again = await EventlogHistory.open(store, "t")
        assert dumped(again.messages()) == dumped(run.all_messages())
        # A non-string result is recorded as its JSON text.
        outcomes = [e.data for e in again.log.window() if e.type == "tool/outcome"]
        assert outcomes and outcomes[0].result.tool_results[0].text == '{"area":0.0,"unit":"m"}'
        await again.log.aclose()


class City(BaseModel):
    name: str
    population: int


async def test_structured_output_runs_close_their_turns() -> None:
    # An output type is an output tool: its call is answered in the run, so each turn closes.
    agent = Agent(TestModel(), output_type=City)
    async with open_store("memory:", types=pydantic_ai_types()) as store:
        history = await EventlogHistory.open(store, "cities")
        for prompt in ("one", "two"):
            run = await agent.run(prompt, message_history=history.messages())
            await history.record(run)
        assert isinstance(run.output, City) and history.messages() == run.all_messages()
        assert core_types(history).count("turn/end") == 2 and not history.pending
        assert not scan(history.log).needs_repair
        await history.log.aclose()


async def test_each_run_of_a_conversation_is_a_turn_and_sees_the_whole_history(
    tmp_path: Path,
) -> None:
    seen: list[int] = []

    def echo(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(len(messages))
        prompt = messages[-1].parts[-1]
        assert isinstance(prompt, UserPromptPart)
        return ModelResponse(parts=[TextPart(f"you said {prompt.content}")])

    agent = Agent(FunctionModel(echo))
    url = f"sqlite:///{tmp_path / 'h.db'}"
    for word in ("one", "two", "three"):
        # Each run in a store opened anew, as a server handling one request at a time would.
        async with open_store(url, types=pydantic_ai_types()) as store:
            history = await EventlogHistory.open(store, "chat")
            result = await agent.run(word, message_history=history.messages())
            await history.record(result)
            await history.record(result)  # recording the same run again adds nothing
            await history.log.aclose()
    assert seen == [1, 3, 5]
    async with open_store(url, types=pydantic_ai_types()) as store:
        history = await EventlogHistory.open(store, "chat")
        assert [m.parts[0].content for m in history.messages()] == [  # type: ignore[union-attr]
            "one", "you said one", "two", "you said two", "three", "you said three",
        ]  # fmt: skip
        turns = [e.data.turn for e in history.log.window() if e.type == "turn/end"]
        assert turns == [1, 2, 3] and not scan(history.log).needs_repair
        await history.log.aclose()


async def test_a_history_trimmed_for_the_model_is_still_recorded_whole() -> None:
    # pydantic-ai's ProcessHistory capability sends the model only the latest messages; the
    # run's result then holds those too. The history records every message of every run.
    sent: list[int] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent.append(len(messages))
        if isinstance(messages[-1].parts[-1], UserPromptPart):
            call = ToolCallPart("lookup", {"who": "bob"}, tool_call_id=f"k{len(sent)}")
            return ModelResponse(parts=[call])
        return ModelResponse(parts=[TextPart("ok")])

    def latest(messages: list[ModelMessage]) -> list[ModelMessage]:
        return messages[-3:]

    agent = Agent(FunctionModel(model), capabilities=[ProcessHistory(latest)])
    tools = make_tools(Path("/dev/null"))
    async with open_store("memory:", types=pydantic_ai_types()) as store:
        history = await EventlogHistory.open(store, "trimmed")
        runs = []
        for i in range(3):
            toolsets = [history.durable(tools)]
            run = await agent.run(f"q{i}", message_history=history.messages(), toolsets=toolsets)
            await history.record(run)
            runs.append(run)
        assert max(sent) <= 3 and len(runs[-1].all_messages()) < 12
        assert history.messages() == [m for run in runs for m in run.new_messages()]
        assert len(history.messages()) == 12 and not scan(history.log).needs_repair
        await history.log.aclose()


async def test_parallel_calls_are_answered_in_the_models_order(tmp_path: Path) -> None:
    tools: FunctionToolset[Any] = FunctionToolset()

    @tools.tool_plain
    async def wait(seconds: float) -> str:
        """Wait a while."""
        await anyio.sleep(seconds)
        return f"waited {seconds}"

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if isinstance(messages[-1].parts[-1], UserPromptPart):
            # The first call finishes last: bodies run together.
            delays = [0.3, 0.1, 0.0]
            calls = [
                ToolCallPart("wait", {"seconds": d}, tool_call_id=f"w{i}")
                for i, d in enumerate(delays)
            ]
            return ModelResponse(parts=calls)
        return ModelResponse(parts=[TextPart("done")])

    async with open_store(f"sqlite:///{tmp_path / 'p.db'}", types=pydantic_ai_types()) as store:
        history = await EventlogHistory.open(store, "p")
        run = await Agent(FunctionModel(model)).run(
            "go", message_history=[], toolsets=[history.durable(tools)]
        )
        await history.record(run)
        events = history.log.window()
        of = {
            t: [e.data.call_id for e in events if e.type == t]
            for t in ("tool/call", "tool/outcome")
        }
        results = [
            e.data.message.tool_results[0].call_id for e in events if e.type == "tool/result"
        ]
        # Started in the model's order, finished as the bodies did, answered in the model's order.
        assert of["tool/call"] == ["w0", "w1", "w2"]
        assert of["tool/outcome"] == ["w2", "w1", "w0"]
        assert results == ["w0", "w1", "w2"]
        assert not scan(history.log).needs_repair
        await history.log.aclose()


async def test_bad_input_is_refused_and_the_store_is_left_byte_identical(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    agent = make_agent()
    async with open_store(f"sqlite:///{path}", types=pydantic_ai_types()) as store:
        history = await EventlogHistory.open(store, "c")
        first = await agent.run("Pay bob 10.", message_history=[])
        await history.record(first)
        head, before = history.log.head, path.read_bytes()
        stranger = await agent.run("Pay carol 5.")  # a run not given this history
        surrogate = [ModelRequest(parts=[UserPromptPart("bad \ud800 text")])]
        refusals = [
            (stranger, "do not continue its history of 4"),
            (first.all_messages()[:2], "do not continue its history of 4"),
            ("not a run", "takes a run's result or its message list, got str"),
            ([*first.all_messages(), {"kind": "request"}], "item 4 is a dict"),
            ([*first.all_messages(), *surrogate], "surrogate"),
        ]
        for bad, says in refusals:
            with pytest.raises(ValidationError, match=re.escape(says)):
                await history.record(bad)
        # The durable toolset refuses a run on another history the same way, before any body.
        marker = tmp_path / "effects.txt"
        with pytest.raises(ValidationError, match="do not continue"):
            await agent.run("Pay bob.", toolsets=[history.durable(make_tools(marker))])
        assert not marker.exists()
        # A session id no store keeps is refused before anything is stored.
        with pytest.raises(ValidationError, match="session id"):
            await EventlogHistory.open(store, "c\n")
        await history.log.flush()
        assert history.log.head == head and path.read_bytes() == before
        assert history.messages() == first.all_messages()
        await history.log.aclose()


async def test_a_failing_body_is_recorded_and_its_rerun_gets_the_record(tmp_path: Path) -> None:
    ran: list[str] = []
    tools: FunctionToolset[Any] = FunctionToolset()

    @tools.tool_plain
    def charge(amount: int) -> str:
        """Charge a card."""
        ran.append("charge")
        raise RuntimeError("card declined")

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if isinstance(messages[-1].parts[-1], UserPromptPart):
            return ModelResponse(parts=[ToolCallPart("charge", {"amount": 5}, tool_call_id="k1")])
        answer = messages[-1].parts[-1]
        assert isinstance(answer, ToolReturnPart)
        return ModelResponse(parts=[TextPart(str(answer.content))])

    agent = Agent(FunctionModel(model))
    async with open_store(f"sqlite:///{tmp_path / 'f.db'}", types=pydantic_ai_types()) as store:
        history = await EventlogHistory.open(store, "f")
        with pytest.raises(RuntimeError, match="card declined"):
            await agent.run("Charge 5.", message_history=[], toolsets=[history.durable(tools)])
        # The run failed: its reply and the body's failure are on record; the turn stays open.
        assert history.pending and ran == ["charge"]
        await history.log.aclose()
        again = await EventlogHistory.open(store, "f")
        assert again.pending
        run = await agent.run(
            None, message_history=again.messages(), toolsets=[again.durable(tools)]
        )
        await again.record(run)
        # The model is told what happened; the body did not run a second time.
        assert run.output == "RuntimeError: card declined" and ran == ["charge"]
        result = next(e.data for e in again.log.window() if e.type == "tool/result")
        assert result.error is not None and result.error.code == "TOOL_FAILED"
        assert not scan(again.log).needs_repair and not again.pending
        await again.log.aclose()


class Other(msgspec.Struct, frozen=True):
    text: str


def test_the_type_refuses_a_name_taken_by_another_payload() -> None:
    types = register_pydantic_ai_types(pydantic_ai_types())
    assert types.get("pydantic_ai/message") is not None
    clashing = EventTypes()
    clashing.register("pydantic_ai/message", Other, ignorable=True)
    with pytest.raises(ValidationError, match="pydantic-ai history"):
        register_pydantic_ai_types(clashing)


def _readme_block() -> str:
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    match = re.search(r"<!-- pydantic-ai:.*?-->\s*```python\n(.*?)```", text, re.S)
    assert match, "README has no pydantic-ai block"
    return match.group(1)


async def test_the_readme_block_makes_an_agents_history_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = _readme_block()
    marker = tmp_path / "effects.txt"
    source = "async def block():\n" + textwrap.indent(code, "    ") + "    return result\n"
    namespace: dict[str, Any] = {
        "open_store": open_store,
        "agent": make_agent(),
        "tools": make_tools(marker),
        "prompt": "Pay bob 10.",
    }
    exec(compile(source, "README.md", "exec"), namespace)
    monkeypatch.chdir(tmp_path)  # the block's relative sessions.db
    result = await namespace["block"]()
    assert [p["id"] for p in json.loads(result.output)] == [c[0] for c in CALLS]
    async with open_store("sqlite:///sessions.db", types=pydantic_ai_types()) as store:
        history = await EventlogHistory.open(store, "conversation-1")
        assert history.messages() == result.all_messages()
        await history.log.aclose()
