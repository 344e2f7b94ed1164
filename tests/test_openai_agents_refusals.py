"""Every public method of the OpenAI Agents ``EventlogSession`` and ``EventlogHooks``, fed
hostile values: a call is accepted, or refused with a typed error that leaves the SQLite file
row for row as it was (after a flush), the session's items as they were, and a retry is refused
the same way without adding a copy."""

from __future__ import annotations

import dataclasses
import inspect
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from agents import RunContextWrapper, RunHooks, function_tool
from agents.items import ModelResponse
from agents.run_context import AgentHookContext
from agents.tool_context import ToolContext
from agents.usage import Usage
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from openai.types.responses import ResponseFunctionToolCall

from agent.integrations.openai_agents import EventlogHooks, EventlogSession, openai_agents_types
from eventlog import BacklogFullError, EventLogError, ValidationError, open_store
from tests.conftest import SOAK
from tests.openai_agents_children.support import make_agent
from tests.refusals import LONE, MAX_EVENT_BYTES, dump, hostile, planted, thread_ids

pytestmark = pytest.mark.anyio
#: Examples per method: a few in the suite, many in a soak run (``EVENTLOG_SOAK=1``).
EXAMPLES = 200 if SOAK else 12

#: Valid items of each kind the session maps (the templates hostile values are planted in).
ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "hello"},
    {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "hi", "annotations": []}],
    },
    {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "hm"}]},
]
#: Text no event can hold: a lone surrogate, a string over the store's event limit.
BAD_TEXT = st.sampled_from([LONE, f"a{LONE}", "x" * (2 * MAX_EVENT_BYTES), "fine"])


@function_tool
def lookup(city: str) -> str:
    """Look a city up."""
    return city


def _tool(name: str) -> Any:
    return dataclasses.replace(lookup, name=name)


def _response(call_id: str, name: str, arguments: str) -> ModelResponse:
    call = ResponseFunctionToolCall(
        call_id=call_id, name=name, arguments=arguments, type="function_call"
    )
    return ModelResponse(output=[call], usage=Usage(), response_id=None)


Call = Callable[[], Awaitable[Any]]


def _call(draw: Callable[..., Any], method: str, session: EventlogSession, store: Any) -> Call:
    """``method`` with hostile arguments drawn for it, as a call that can be made again with
    the same arguments."""
    hooks: RunHooks[Any] = session.hooks
    wrapper = RunContextWrapper(context=None)
    agent = make_agent(None, [])  # type: ignore[arg-type]  # never calls the model

    def tool_context() -> ToolContext[Any]:
        return ToolContext(
            context=None,
            tool_name="lookup",
            tool_call_id=draw(st.one_of(st.just("c9"), BAD_TEXT, hostile())),
            tool_arguments=draw(st.one_of(st.just("{}"), BAD_TEXT, hostile())),
        )

    if method == "add_items":
        items = draw(planted(ITEMS[:4]))
        return lambda: session.add_items(items)
    if method == "get_items":
        limit = draw(st.one_of(hostile(), st.just("2")))
        return lambda: session.get_items(limit)
    if method == "open":
        session_id = draw(thread_ids())
        metadata = draw(st.one_of(st.none(), planted({"k": ["v", 1]}), hostile()))

        async def opened() -> None:
            other = await EventlogSession.open(store, session_id, metadata=metadata)
            await other.log.aclose()

        return opened
    if method == "log_model_output":
        reply = draw(planted(ITEMS[1:3]))
        return lambda: _sync(session.log_model_output, reply)
    if method == "guard":

        async def guarded() -> None:
            async with session.guard():
                pass

        return guarded
    if method == "save_interruption":
        result = draw(hostile())
        return lambda: session.save_interruption(result)
    if method == "pending_run":
        # Nothing paused in the seeded session: whatever the agent, no run is rebuilt.
        starting = draw(hostile())
        return lambda: session.pending_run(starting)
    if method in ("approve", "deny"):
        # The seeded session's call asked for no decision: any decision on it is refused.
        call_id = draw(st.one_of(st.just("c1"), BAD_TEXT, hostile()))
        by, reason = draw(st.one_of(st.just("ana"), hostile())), draw(hostile())
        return lambda: getattr(session, method)(call_id, by=by, reason=reason)
    if method == "pending_approvals":
        return session.pending_approvals
    if method in ("hooks", "step", "end_turn", "watched"):
        return lambda: _sync(lambda: getattr(session, method))
    if method in ("pop_item", "clear_session"):
        return getattr(session, method)  # type: ignore[no-any-return]
    if method == "on_llm_end":
        response = _response(draw(BAD_TEXT), draw(BAD_TEXT), draw(BAD_TEXT))
        return lambda: hooks.on_llm_end(wrapper, agent, response)
    if method == "on_tool_start":
        context, tool = tool_context(), _tool(draw(BAD_TEXT))
        return lambda: hooks.on_tool_start(context, agent, tool)
    if method == "on_tool_end":
        context, result = tool_context(), draw(st.one_of(BAD_TEXT, hostile()))
        return lambda: hooks.on_tool_end(context, agent, _tool("lookup"), result)
    if method == "on_agent_end":
        output = draw(hostile())
        return lambda: hooks.on_agent_end(AgentHookContext(context=None), agent, output)
    if method == "on_llm_start":
        prompt = draw(BAD_TEXT)
        return lambda: hooks.on_llm_start(wrapper, agent, prompt, [])
    if method == "on_agent_start":
        return lambda: hooks.on_agent_start(AgentHookContext(context=None), agent)
    assert method == "on_handoff", method
    return lambda: hooks.on_handoff(wrapper, agent, agent)


async def _sync(method: Callable[..., Any], *args: Any) -> Any:
    value = method(*args)
    return value() if callable(value) else value


def _public(cls: type) -> set[str]:
    return {
        name
        for name, value in inspect.getmembers(cls)
        if not name.startswith("_") and (callable(value) or isinstance(value, property))
    }


METHODS = sorted(_public(EventlogSession) | (_public(EventlogHooks) - {"session"}))


def test_the_property_covers_every_public_method() -> None:
    # A public method added later must be added to the property below (names the gap).
    covered = {
        "add_items", "get_items", "pop_item", "clear_session", "open", "hooks",
        "log_model_output", "step", "end_turn", "on_llm_end", "on_tool_start", "on_tool_end",
        "on_agent_end", "on_agent_start", "on_llm_start", "on_handoff", "watched", "guard",
        "save_interruption", "pending_run", "pending_approvals", "approve", "deny",
    }  # fmt: skip
    assert set(METHODS) == covered


async def _seeded(store: Any) -> EventlogSession:
    """A session mid-turn: a user message, then a model reply the hooks logged (its step is
    open, its call not yet answered)."""
    session = await EventlogSession.open(store, f"s{uuid.uuid4().hex}")
    await session.add_items([dict(ITEMS[0])])
    session.log_model_output([dict(ITEMS[2])])
    await session.log.flush()
    return session


@pytest.mark.parametrize("method", METHODS)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
async def test_a_refused_call_changes_nothing_and_a_retry_adds_no_copy(
    tmp_path: Path, method: str, data: st.DataObject
) -> None:
    path = tmp_path / "store.db"
    url = f"sqlite:///{path}"
    async with open_store(
        url, types=openai_agents_types(), max_event_bytes=MAX_EVENT_BYTES
    ) as store:
        session = await _seeded(store)
        before, items, head = dump(path), await session.get_items(), session.log.head
        call = _call(data.draw, method, session, store)
        # The call, with whatever was drawn for it.
        try:
            await call()
        except Exception as exc:
            note(f"refused: {exc!r}")
            # A refusal is typed ...
            assert isinstance(exc, EventLogError), f"{method} raised {exc!r}"
            # ... and, once anything queued had its chance to be written, nothing changed:
            await session.log.flush()
            assert dump(path) == before
            assert session.log.head == head
            assert await session.get_items() == items
            # A retry of the same call is refused the same way and adds no copy.
            with pytest.raises(type(exc)):
                await call()
            await session.log.flush()
            assert dump(path) == before
        await session.log.aclose()


async def test_add_items_is_all_or_nothing_when_the_last_item_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    async with open_store(f"sqlite:///{path}", types=openai_agents_types()) as store:
        session = await EventlogSession.open(store, "s")
        await session.add_items([dict(ITEMS[0])])
        before, items = dump(path), await session.get_items()
        # A user message the core can say, then an item that keeps the SDK's spelling with a
        # NaN in it: the whole call is refused, naming where.
        batch = [{"role": "user", "content": "again"}, {"type": "reasoning", "score": float("nan")}]
        for _ in range(3):  # every retry the same
            with pytest.raises(ValidationError, match=r"got nan - at `\$.items\[0\].score`"):
                await session.add_items(batch)
            await session.log.flush()
            assert dump(path) == before
            assert await session.get_items() == items
        # The same items without the NaN are appended whole.
        batch[1] = {"type": "reasoning", "score": 0.5}
        await session.add_items(batch)
        assert await session.get_items() == [*items, *batch]


async def test_add_items_is_all_or_nothing_when_the_write_backlog_would_fill(
    tmp_path: Path,
) -> None:
    # A store whose backlog takes 1 MiB, and a call of four 400 kB messages: append would take
    # the first events and refuse a later one, so the call is refused before the first.
    path = tmp_path / "store.db"
    options = {"max_pending_bytes": 2**20, "max_event_bytes": 2**20}
    async with open_store(f"sqlite:///{path}", types=openai_agents_types(), **options) as store:
        session = await EventlogSession.open(store, "s")
        await session.add_items([dict(ITEMS[0])])
        await session.log.flush()
        before, items, head = dump(path), await session.get_items(), session.log.head
        batch = [{"role": "user", "content": "x" * 400_000} for _ in range(4)]
        for _ in range(2):  # a retry is refused the same way, and adds no copy
            with pytest.raises(BacklogFullError, match="would be waiting to be written"):
                await session.add_items(batch)
            assert session.log.head == head
            await session.log.flush()
            assert dump(path) == before
            assert await session.get_items() == items
        # One of them fits (its core event and the event keeping the SDK's spelling): appended.
        await session.add_items(batch[:1])
        assert await session.get_items() == [*items, *batch[:1]]


@pytest.mark.parametrize("session_id", ["t\n", f"t{LONE}", "a" * 129, "", "../t"])
async def test_a_session_id_the_store_refuses_is_refused_up_front(
    tmp_path: Path, session_id: str
) -> None:
    path = tmp_path / "store.db"
    async with open_store(f"sqlite:///{path}", types=openai_agents_types()) as store:
        before = dump(path)
        with pytest.raises(ValidationError, match="is not valid"):
            await EventlogSession.open(store, session_id)
        assert dump(path) == before


async def test_a_value_too_deep_to_print_is_refused_by_name(tmp_path: Path) -> None:
    # Nested far past Python's recursion limit: even repr fails on it.
    deep: Any = 1
    for _ in range(100_000):
        deep = {"a": deep}
    path = tmp_path / "store.db"
    async with open_store(f"sqlite:///{path}", types=openai_agents_types()) as store:
        session = await _seeded(store)
        before = dump(path)
        # Each refusal is typed, short, and names where.
        with pytest.raises(ValidationError, match=r"got `dict` nested deeper - at `\$.items"):
            await session.add_items([{"type": "reasoning", "deep": deep}])
        with pytest.raises(ValidationError, match="got `dict`"):
            await session.get_items(deep)
        with pytest.raises(ValidationError, match="is not valid") as caught:
            await EventlogSession.open(store, deep)
        assert len(str(caught.value)) < 400
        await session.log.flush()
        assert dump(path) == before
        await session.log.aclose()
