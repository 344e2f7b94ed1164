"""Constructor arguments: plain functions become tools; every wrong argument is refused at once.

Each refusal is an :class:`~agent.AgentConfigError` (a ``TypeError`` and a ``ValueError``)
naming the argument, what it must be and what was given, raised before anything is built or
written, instead of an ``AttributeError`` (or a provider's 400) in the middle of a later turn.
"""

from __future__ import annotations

import functools
import math
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any

import anyio
import msgspec
import pytest

from agent import (
    INVALID_ARGUMENTS,
    TOOL_FAILED,
    Agent,
    AgentConfigError,
    AutoCompaction,
    Chunk,
    Finish,
    FunctionTool,
    ModelError,
    ModelRequest,
    Response,
    RetryPolicy,
    ScriptedModel,
    TextDelta,
    Toolbox,
    ToolExecutor,
    ToolOutput,
    model_summarizer,
    tool,
)
from agent.models import AnthropicMessages, OpenAIChat
from eventlog import Session, StepStart, ToolError, TurnStart, open_store
from tests.agent_children.support import events_of

pytestmark = pytest.mark.anyio


def forecast(city: str, days: int = 3) -> str:
    """The forecast for a city."""
    return f"{city}: sunny for {days} days"


def refused(build: Callable[[], object]) -> str:
    """The message of the AgentConfigError ``build`` raises."""
    with pytest.raises(AgentConfigError) as caught:
        build()
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, ValueError)
    return str(caught.value)


# -- plain functions are tools -----------------------------------------------------------------


async def test_a_plain_function_is_made_a_tool_like_at_tool(session: Session) -> None:
    # The model calls the plain function by its name, with its typed parameters.
    model = ScriptedModel(
        [Response(tool_calls=[("forecast", '{"city": "Oslo"}')]), Response(text="Sunny.")]
    )
    agent = Agent(session, model, [forecast])
    # Offered with the name, docstring and schema that @tool derives.
    (spec,) = agent.toolbox.specs()
    assert spec == tool(forecast).spec
    assert spec.description == "The forecast for a city."
    assert spec.parameters["required"] == ["city"]
    agent.followup("Weather in Oslo?")
    with anyio.fail_after(10):
        assert [o.reason for o in await agent.run_until_idle()] == ["completed"]
    (result,) = events_of(session, "tool/result")
    assert result.data.message.tool_results[0].content == "Oslo: sunny for 3 days"


def test_partials_callable_objects_and_constraints_are_tools() -> None:
    # A partial needs a name; its bound parameters are not offered.
    two_days = tool(functools.partial(forecast, days=2), name="two_days")
    assert list(two_days.parameters["properties"]) == ["city", "days"]

    class Counter:
        def __call__(self, n: Annotated[int, msgspec.Meta(ge=0)]) -> str:
            return str(n)

    counter = tool(Counter(), name="count")
    # The Annotated constraint is kept: in the schema, and checked when decoding.
    assert counter.parameters["properties"]["n"] == {"type": "integer", "minimum": 0}
    with pytest.raises(ValueError, match="Expected `int` >= 0"):
        counter.decode('{"n": -1}')


# -- the agent's arguments ---------------------------------------------------------------------


async def test_the_agent_refuses_what_is_not_a_session_or_a_model(session: Session) -> None:
    model = ScriptedModel([])
    assert refused(lambda: Agent("abc", model)) == (  # type: ignore[arg-type]
        "Agent: session must be an eventlog Session (from store.create or store.open), "
        "got str 'abc'"
    )
    assert refused(lambda: Agent(session, "gpt-4o")) == (  # type: ignore[arg-type]
        "Agent: model must be a Model (a string `name` and a `stream(request)` method, "
        "e.g. OpenAIChat), got str 'gpt-4o'"
    )


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        (
            forecast,
            "Agent: tools must be an iterable of tools or functions (put a single one in a "
            "list), got function <function forecast",
        ),
        ("forecast", "Agent: tools must be an iterable of tools or functions"),
        (
            [forecast, 3],
            "Agent: tools[1]: each tool must be a Tool (see agent.tool) or a plain function, "
            "got int 3",
        ),
        ([forecast, forecast], "Agent: two tools are named 'forecast'"),
        (
            [lambda city: city],  # a lambda has no name the providers accept
            "tool '<lambda>': the tool name must be 1 to 64 letters, digits, '_' or '-', got "
            "str '<lambda>'",
        ),
    ],
    ids=["a-function-not-in-a-list", "a-string", "a-number", "a-duplicate", "a-lambda"],
)
async def test_the_agent_refuses_bad_tools(session: Session, tools: Any, message: str) -> None:
    assert refused(lambda: Agent(session, ScriptedModel([]), tools)).startswith(message)


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ({"system": None}, "Agent: system must be a string, got NoneType None"),
        ({"model_name": 4}, "Agent: model_name must be a string or None, got int 4"),
        ({"max_parallel": 0}, "Agent: max_parallel must be an integer >= 1, got int 0"),
        ({"max_steps": "8"}, "Agent: max_steps must be an integer >= 1, got str '8'"),
        ({"max_steps": True}, "Agent: max_steps must be an integer >= 1, got bool True"),
        (
            {"params": {"temperature": math.nan}},
            "Agent: params cannot be recorded: Expected a finite `float` (JSON has no NaN or "
            "infinity), got nan - at `params.temperature`",
        ),
        ({"params": [1]}, "Agent: params must be a mapping of names to JSON values, or None"),
        ({"retry": 3}, "Agent: retry must be a RetryPolicy or None, got int 3"),
        ({"compaction": "auto"}, "Agent: compaction must be an AutoCompaction or None"),
        ({"store": "sqlite:///x.db"}, "Agent: store must be the session's Store"),
    ],
)
async def test_the_agent_refuses_bad_options(
    session: Session, option: dict[str, Any], message: str
) -> None:
    assert refused(lambda: Agent(session, ScriptedModel([]), **option)).startswith(message)


async def test_a_read_only_session_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ro.db'}"
    async with open_store(url) as store:
        await (await store.create(session_id="s")).aclose()
        reader = await store.open("s", salvage=True)  # a salvaged session is read-only
        assert "session must be writable (this one was opened read-only)" in refused(
            lambda: Agent(reader, ScriptedModel([]))
        )


async def test_resume_refuses_bad_arguments_before_touching_the_session(tmp_path: Path) -> None:
    # A crash left turn 1 open: resuming would repair it.
    db = tmp_path / "crashed.db"
    async with open_store(f"sqlite:///{db}") as store:
        session = await store.create(session_id="s")
        session.append("turn/start", TurnStart(turn=1))
        session.append("step/start", StepStart(turn=1, step=1))
        await session.flush()
        await session.aclose()
        before = (db.read_bytes(), await store.list())
        # A bad model, a bad option, an unknown option: refused, and nothing repaired or held.
        with pytest.raises(AgentConfigError, match="Agent: model must be a Model"):
            await Agent.resume(store, "s", "gpt-4o")  # type: ignore[arg-type]
        with pytest.raises(AgentConfigError, match="Agent: max_steps must be"):
            await Agent.resume(store, "s", ScriptedModel([]), max_steps=0)
        with pytest.raises(TypeError, match="unexpected keyword argument 'max_retries'"):
            await Agent.resume(store, "s", ScriptedModel([]), max_retries=3)
        assert (db.read_bytes(), await store.list()) == before  # the same head: no repair
        # The session is free: a resume with good arguments takes it and repairs the turn.
        tools = (t for t in [forecast])  # taken once, though checked before the open
        agent = await Agent.resume(store, "s", ScriptedModel([]), tools, wait=0)
        assert agent.repair_report is not None and agent.repair_report.appended
        assert [t.name for t in agent.toolbox] == ["forecast"]
        await agent.session.aclose()


# -- tools, toolboxes, adapters and the other constructors -------------------------------------


def test_tool_refuses_what_cannot_be_a_tool() -> None:
    def spread(*names: str) -> str:
        return ",".join(names)

    def positional(city: str, /) -> str:
        return city

    def opaque(where: Path) -> str:
        return str(where)

    def unresolved(city: Nowhere) -> str:  # type: ignore[name-defined]  # noqa: F821
        return str(city)

    assert refused(lambda: tool("forecast")) == (  # type: ignore[call-overload]
        "tool: fn must be a function (sync or async), got str 'forecast'"
    )
    assert refused(lambda: tool(functools.partial(forecast))) == (
        "tool: name must be given for a callable without a __name__, got NoneType None"
    )
    assert refused(lambda: tool(forecast, name="get weather")) == (
        "tool 'forecast': the tool name must be 1 to 64 letters, digits, '_' or '-', got str "
        "'get weather'"
    )

    async def stream_lines() -> AsyncIterator[str]:
        yield "line"

    assert refused(lambda: tool(stream_lines)) == (  # type: ignore[arg-type]
        "tool 'stream_lines': a generator function cannot be a tool body (it must return its "
        "result, not yield it)"
    )
    assert refused(lambda: tool(spread)) == (
        "tool 'spread': parameter 'names' cannot be passed by name (the model sends a JSON "
        "object of named arguments): use keyword parameters, or one Struct"
    )
    assert "parameter 'city' cannot be passed by name" in refused(lambda: tool(positional))
    assert refused(lambda: tool(opaque)).startswith(
        "tool 'opaque': its parameters cannot be described as JSON: "
    )
    assert refused(lambda: tool(unresolved)).startswith(
        "tool 'unresolved': cannot evaluate the annotations of <function"
    )
    assert refused(lambda: tool(forecast, safe="yes")) == (  # type: ignore[call-overload]
        "tool 'forecast': safe must be True, False or a predicate over the arguments, got str 'yes'"
    )
    assert refused(lambda: FunctionTool(forecast, description=3)) == (  # type: ignore[arg-type]
        "tool 'forecast': description must be a string or None, got int 3"
    )


async def test_the_toolbox_and_executor_check_their_arguments(session: Session) -> None:
    assert refused(lambda: Toolbox(forecast)).startswith("Toolbox: tools must be an iterable")  # type: ignore[arg-type]
    assert len(Toolbox([forecast, tool(forecast, name="again")])) == 2
    assert refused(
        lambda: ToolExecutor(session, [forecast], turn=1, step=1, cancel=anyio.Event())  # type: ignore[arg-type]
    ).startswith("ToolExecutor: toolbox must be a Toolbox, got list")
    assert refused(
        lambda: ToolExecutor(
            session, Toolbox(), turn=1, step=1, cancel=anyio.Event(), max_parallel=0
        )
    ) == ("ToolExecutor: max_parallel must be an integer >= 1, got int 0")


def test_the_provider_adapters_check_their_arguments() -> None:
    import anthropic
    import openai

    assert refused(lambda: OpenAIChat(openai.AsyncOpenAI(api_key="k"))).startswith(  # type: ignore[arg-type]
        "OpenAIChat: model must be a string, got AsyncOpenAI"
    )
    assert refused(lambda: OpenAIChat("m", timeout=0)) == (
        "OpenAIChat: timeout must be a finite number of seconds > 0, got int 0"
    )
    assert refused(lambda: OpenAIChat("m", degrade="skip")) == (  # type: ignore[arg-type]
        "OpenAIChat: degrade must be one of 'refuse', 'text', 'drop', got str 'skip'"
    )
    assert refused(lambda: OpenAIChat("m", client=openai.OpenAI(api_key="k"))).startswith(  # type: ignore[arg-type]
        "OpenAIChat: client must be an async client (openai.AsyncOpenAI) or None, got OpenAI"
    )
    # A subclass of the async client (Azure's) is one.
    azure = openai.AsyncAzureOpenAI(
        api_key="k", api_version="2024-10-21", azure_endpoint="https://example.invalid"
    )
    assert OpenAIChat("m", client=azure).client.base_url.host == "example.invalid"
    async_client = anthropic.AsyncAnthropic(api_key="k")
    assert (
        refused(lambda: AnthropicMessages("m", client=async_client, base_url="http://elsewhere"))
        == "AnthropicMessages: base_url must be None when a client is given, got str 'http://elsewhere'"
    )
    assert refused(lambda: AnthropicMessages("m", api_key=b"k")) == (  # type: ignore[arg-type]
        "AnthropicMessages: api_key must be a string or None, got bytes b'k'"
    )


async def test_no_tools_may_be_said_with_none(session: Session) -> None:
    assert len(Agent(session, ScriptedModel([]), None).toolbox) == 0


def test_a_model_error_checks_its_advice() -> None:
    # A Model raising ModelError with advice of the wrong type learns it there, not mid-retry.
    assert refused(lambda: ModelError("busy", retry_after="5")) == (  # type: ignore[arg-type]
        "ModelError: retry_after must be None or seconds >= 0, got str '5'"
    )
    assert refused(lambda: ModelError("busy", retryable=1)) == (  # type: ignore[arg-type]
        "ModelError: retryable must be True or False, got int 1"
    )
    assert "retry_after must be None or seconds >= 0, got float nan" in refused(
        lambda: ModelError("busy", retry_after=math.nan)
    )
    assert ModelError("busy", retry_after=math.inf).retry_after == math.inf  # a policy gives up


def test_the_scripted_model_compaction_and_policy_check_their_arguments() -> None:
    assert refused(lambda: ScriptedModel("hello")) == (  # type: ignore[arg-type]
        "ScriptedModel: script must be a sequence of responses, or a function, got str 'hello'"
    )
    assert refused(lambda: ScriptedModel([Response(), "hi"])) == (  # type: ignore[list-item]
        "ScriptedModel: script[1] must be a Response, or a function of the request returning "
        "one, got str 'hi'"
    )

    async def summarize(messages: Any) -> str:
        return "summary"

    assert refused(lambda: AutoCompaction(summarize, trigger_tokens=-1, retain_tokens=0)) == (
        "AutoCompaction: trigger_tokens must be an integer >= 0, got int -1"
    )
    assert refused(lambda: AutoCompaction("sum", 10, 5)).startswith(  # type: ignore[arg-type]
        "AutoCompaction: summarizer must be an async function of messages, got str"
    )
    assert refused(lambda: model_summarizer("gpt")).startswith(  # type: ignore[arg-type]
        "model_summarizer: model must be a Model"
    )
    assert refused(lambda: RetryPolicy(max_retries=1.5)).startswith(  # type: ignore[arg-type]
        "RetryPolicy: max_retries must be an integer >= 0"
    )


@pytest.mark.parametrize(
    ("output", "why"),
    [
        (
            ToolOutput(content=5),  # type: ignore[arg-type]
            "content must be a string or a sequence of text, image and file parts, got int 5",
        ),
        (ToolOutput(content="x", is_error="no"), "is_error must be True or False, got str 'no'"),  # type: ignore[arg-type]
        (
            ToolOutput(content="x", is_error=True, error_code=7),  # type: ignore[arg-type]
            "error_code must be a string or None, got int 7",
        ),
    ],
)
async def test_a_malformed_tool_output_is_a_failed_call_not_a_broken_turn(
    session: Session, output: ToolOutput, why: str
) -> None:
    # msgspec does not check a Struct's fields when it is built: the body's bad output is
    # answered as a failed call, and the turn goes on.
    def bad() -> ToolOutput:
        """Returns a malformed output."""
        return output

    model = ScriptedModel([Response(tool_calls=[("bad", "{}")]), Response(text="It failed.")])
    agent = Agent(session, model, [bad])
    agent.followup("Go")
    with anyio.fail_after(10):
        assert [o.reason for o in await agent.run_until_idle()] == ["completed"]
    (result,) = events_of(session, "tool/result")
    assert result.data.error == ToolError(name="TypeError", code=TOOL_FAILED)
    assert result.data.message.tool_results[0].content == (
        f"TypeError: the tool returned a ToolOutput whose {why}"
    )


async def test_a_custom_decoder_that_breaks_answers_the_call_invalid(session: Session) -> None:
    # A Tool of one's own whose decode raises something other than a ValueError.
    class Fragile:
        name = "fragile"
        description = "breaks on decode"
        parameters: Mapping[str, Any] = MappingProxyType({"type": "object"})

        def decode(self, arguments: str) -> Any:
            raise KeyError("path")

        def is_concurrency_safe(self, args: Any) -> bool:
            return True

        async def call(self, args: Any, context: Any) -> ToolOutput:
            raise AssertionError("never run")

    model = ScriptedModel([Response(tool_calls=[("fragile", "{}")]), Response(text="Broken.")])
    agent = Agent(session, model, [Fragile()])
    agent.followup("Go")
    with anyio.fail_after(10):
        assert [o.reason for o in await agent.run_until_idle()] == ["completed"]
    (result,) = events_of(session, "tool/result")
    assert result.data.error == ToolError(name="ToolArgumentsError", code=INVALID_ARGUMENTS)
    assert result.data.message.tool_results[0].content == (
        "the arguments could not be decoded: KeyError: 'path'"
    )


@pytest.mark.parametrize(
    ("chunk", "said"),
    [
        ("hello", "str 'hello': not a chunk (TextDelta, ReasoningDelta, ToolCallDelta or Finish)"),
        (TextDelta(text=5), "TextDelta TextDelta(text=5): a field of the wrong type"),  # type: ignore[arg-type]
        (
            Finish(kind="done"),  # type: ignore[arg-type]
            "Finish Finish(kind='done', usage=None, error=None): a field of the wrong type",
        ),
    ],
)
async def test_a_model_that_yields_a_malformed_chunk_fails_its_attempt(
    session: Session, chunk: Any, said: str
) -> None:
    # A Model of one's own that breaks the stream contract: the attempt fails saying how,
    # it is not retried (the model would do it again), and the turn ends error.
    class Broken:
        name = "broken"
        calls = 0

        async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
            self.calls += 1
            yield chunk
            yield Finish(kind="stop")

    model = Broken()
    agent = Agent(session, model)
    agent.followup("Go")
    with anyio.fail_after(10):
        assert [o.reason for o in await agent.run_until_idle()] == ["error"]
    (attempt,) = events_of(session, "assistant/attempt")
    assert attempt.data.error == f"ModelError: the model yielded {said}"
    assert model.calls == 1
