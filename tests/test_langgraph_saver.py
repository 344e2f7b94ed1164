"""``EventlogSaver`` beyond the official suite: its session ids, its log, concurrency, the sync
bridge, deletion, and what a reader that does not know its types sees."""

from __future__ import annotations

import re
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TypedDict

import anyio
import anyio.to_thread
import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    empty_checkpoint,
)
from langgraph.graph import END, START, StateGraph

from agent.integrations.langgraph import (
    CHECKPOINT,
    WRITES,
    EventlogSaver,
    EventLoopThreadError,
    langgraph_types,
    register_langgraph_types,
    session_id_for,
)
from eventlog import (
    EventTypes,
    SessionBusyError,
    SessionExistsError,
    SessionNotFoundError,
    Unknown,
    ValidationError,
    open_store,
    validate_session_id,
)

pytestmark = pytest.mark.anyio


def _config(thread: str, checkpoint_id: str | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def _checkpoint(number: int) -> Checkpoint:
    checkpoint = empty_checkpoint()
    checkpoint["id"] = f"1ef-{number:04d}"
    checkpoint["channel_values"] = {"count": number}
    checkpoint["channel_versions"] = {"count": number + 1}
    return checkpoint


@pytest.fixture
async def saver() -> AsyncIterator[EventlogSaver]:
    async with open_store("memory:", types=langgraph_types()) as store:
        async with EventlogSaver(store) as saver:
            yield saver


@given(st.text(max_size=300))
def test_any_thread_id_maps_to_a_valid_session_id(thread_id: str) -> None:
    session_id = session_id_for(thread_id)
    assert validate_session_id(session_id) == session_id
    # The map is one-to-one: a readable id and a hashed one never meet.
    assert session_id.startswith("lg-" if session_id[2] == "-" else "lgh-")


def test_plain_thread_ids_stay_readable_and_others_are_hashed() -> None:
    assert session_id_for("user-42") == "lg-user-42"
    assert session_id_for("a b") == session_id_for("a b")
    assert session_id_for("a b") != session_id_for("a  b")
    assert session_id_for("a b").startswith("lgh-") and len(session_id_for("a b")) == 68
    # A readable id that looks like a hashed one stays on its own side.
    hashed = session_id_for("a b")
    assert session_id_for(hashed) == "lg-" + hashed != hashed


async def test_a_store_without_the_types_is_refused() -> None:
    async with open_store("memory:") as store:
        with pytest.raises(ValidationError, match="does not know the event types") as caught:
            EventlogSaver(store)
    assert "langgraph_types()" in str(caught.value)


def test_registering_twice_keeps_one_registration_and_a_clash_is_refused() -> None:
    types = register_langgraph_types(langgraph_types())
    assert types.get(CHECKPOINT) is not None and types.get(WRITES) is not None
    clash = EventTypes()
    clash.register(CHECKPOINT, Unknown)
    with pytest.raises(ValidationError, match="not the LangGraph saver's Checkpointed"):
        register_langgraph_types(clash)


async def test_one_thread_is_one_session_and_its_id_is_in_the_metadata(
    saver: EventlogSaver,
) -> None:
    # A thread id that is not a valid session id: any text works.
    thread = "user 7 / conversation ✓"
    await saver.aput(_config(thread), _checkpoint(0), {"step": 0}, {"count": 1})
    infos = await saver._store.list()
    assert [(i.id, i.metadata) for i in infos] == [
        (session_id_for(thread), {"langgraph": {"thread_id": thread}})
    ]
    loaded = await saver.aget_tuple(_config(thread))
    assert loaded is not None and loaded.checkpoint["channel_values"] == {"count": 0}


async def test_concurrent_calls_on_a_new_thread_share_one_session_in_call_order(
    saver: EventlogSaver,
) -> None:
    # LangGraph's executor calls the saver from many tasks at once, the first for a thread
    # that does not exist yet: one session is created, every call is logged in call order.
    parent = _config("t", "1ef-0000")
    async with anyio.create_task_group() as tg:
        for task in range(20):
            tg.start_soon(saver.aput_writes, parent, [("count", task)], f"task-{task:02d}")
        metadata: CheckpointMetadata = {"step": 1}
        versions: ChannelVersions = {"count": 2}
        tg.start_soon(saver.aput, parent, _checkpoint(1), metadata, versions)
    session = saver._threads["t"].session
    logged = [getattr(e.data, "task_id", "put") for e in await session.events()]
    assert logged == [f"task-{task:02d}" for task in range(20)] + ["put"]
    assert session.durable == session.head == 20
    loaded = await saver.aget_tuple(_config("t", "1ef-0000"))
    assert loaded is None  # writes against a checkpoint that was never put
    child = await saver.aget_tuple(_config("t"))
    assert child is not None and child.parent_config == parent


async def test_a_regular_write_is_kept_once_and_not_logged_again(saver: EventlogSaver) -> None:
    parent = await saver.aput(_config("t"), _checkpoint(0), {"step": 0}, {"count": 1})
    await saver.aput_writes(parent, [("count", 1)], "task")
    await saver.aput_writes(parent, [("count", 2)], "task")  # same task, same index
    session = saver._threads["t"].session
    assert [e.type for e in await session.events()] == [CHECKPOINT, WRITES]
    loaded = await saver.aget_tuple(parent)
    assert loaded is not None and loaded.pending_writes == [("task", "count", 1)]


async def test_the_sync_methods_bridge_from_another_thread(saver: EventlogSaver) -> None:
    # LangGraph's sync graph API calls put/get_tuple/list from worker threads.
    def work() -> Any:
        stored = saver.put(_config("t"), _checkpoint(0), {"step": 0}, {"count": 1})
        saver.put_writes(stored, [("count", 5)], "task")
        return saver.get_tuple(stored), list(saver.list(_config("t")))

    loaded, listed = await anyio.to_thread.run_sync(work)
    assert loaded.pending_writes == [("task", "count", 5)]
    assert [t.checkpoint["id"] for t in listed] == ["1ef-0000"]


async def test_the_sync_graph_api_runs_from_a_worker_thread(saver: EventlogSaver) -> None:
    # graph.invoke calls put/put_writes from LangGraph's own executor threads, concurrently.
    builder = StateGraph(_Counter)
    builder.add_node("one", lambda state: {"count": state["count"] + 1})
    builder.add_node("two", lambda state: {"count": state["count"] * 10})
    builder.add_edge(START, "one")
    builder.add_edge("one", "two")
    builder.add_edge("two", END)
    graph = builder.compile(checkpointer=saver)
    config: RunnableConfig = {"configurable": {"thread_id": "sync"}}
    result = await anyio.to_thread.run_sync(lambda: graph.invoke({"count": 1}, config))
    assert result == {"count": 20}
    # The same thread, read back through the async API: every checkpoint is on record.
    steps = [t.metadata["step"] async for t in saver.alist(config)]
    assert steps == [2, 1, 0, -1]


async def test_a_sync_call_on_the_loop_thread_is_refused_and_changes_nothing(
    saver: EventlogSaver,
) -> None:
    with pytest.raises(EventLoopThreadError, match="would block the loop") as caught:
        saver.put(_config("t"), _checkpoint(0), {"step": 0}, {"count": 1})
    assert "aget_tuple, aput" in str(caught.value)
    assert await saver._store.list() == []


async def test_delete_thread_deletes_the_session(saver: EventlogSaver) -> None:
    await saver.aput(_config("t"), _checkpoint(0), {"step": 0}, {"count": 1})
    await saver.adelete_thread("t")
    with pytest.raises(SessionNotFoundError):
        await saver._store.open(session_id_for("t"))
    assert await saver.aget_tuple(_config("t")) is None
    await saver.adelete_thread("never existed")  # not an error


async def test_a_foreign_session_under_the_threads_id_is_refused(saver: EventlogSaver) -> None:
    foreign = await saver._store.create(session_id=session_id_for("t"), metadata={"app": 1})
    await foreign.aclose()
    with pytest.raises(SessionExistsError, match="is not LangGraph thread 't'"):
        await saver.aput(_config("t"), _checkpoint(0), {"step": 0}, {"count": 1})
    again = await saver._store.open(session_id_for("t"))
    assert again.head == -1  # nothing was appended to it


async def test_the_index_is_rebuilt_from_the_log_after_a_restart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/lg.db"
    # Write a chain of checkpoints with writes, then close everything.
    async with open_store(url, types=langgraph_types()) as store:
        async with EventlogSaver(store) as saver:
            config = _config("t")
            for number in range(3):
                config = await saver.aput(config, _checkpoint(number), {"step": number}, {})
                await saver.aput_writes(config, [("count", number)], "task")
            before = [t async for t in saver.alist(None)]
    # A new store and saver fold the log into the same answers.
    async with open_store(url, types=langgraph_types()) as store:
        async with EventlogSaver(store) as saver:
            after = [t async for t in saver.alist(None)]
    assert after == before and len(after) == 3


async def test_a_thread_has_one_writer(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/lg.db"
    async with open_store(url, types=langgraph_types()) as first:
        async with EventlogSaver(first) as saver:
            await saver.aput(_config("t"), _checkpoint(0), {"step": 0}, {"count": 1})
            # A second store (another host or process) cannot write the same thread.
            async with open_store(url, types=langgraph_types()) as second:
                other = EventlogSaver(second)
                with pytest.raises(SessionBusyError):
                    await other.aput(_config("t"), _checkpoint(1), {"step": 1}, {"count": 2})


async def test_a_reader_without_the_types_still_opens_the_session(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/lg.db"
    async with open_store(url, types=langgraph_types()) as store:
        async with EventlogSaver(store) as saver:
            config = await saver.aput(_config("t"), _checkpoint(0), {"step": 0}, {"count": 1})
            await saver.aput_writes(config, [("count", 1)], "task")
    # The eventlog command opens stores like this: the saver's types are ignorable.
    async with open_store(url) as plain:
        session = await plain.open(session_id_for("t"))
        assert [type(e.data) for e in await session.events()] == [Unknown, Unknown]
        assert [e.type for e in await session.events()] == [CHECKPOINT, WRITES]


class _Counter(TypedDict):
    count: int


def _readme_block() -> str:
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    match = re.search(r"<!-- langgraph:.*?-->\s*```python\n(.*?)```", text, re.S)
    assert match, "README has no LangGraph block"
    return match.group(1)


async def test_the_readme_block_switches_a_graph_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = _readme_block()
    assert len([line for line in code.splitlines() if line.strip()]) == 4
    # The block as written, inside a coroutine, with a graph builder and input of its own.
    builder = StateGraph(_Counter)
    builder.add_node("bump", lambda state: {"count": state["count"] + 1})
    builder.add_edge(START, "bump")
    builder.add_edge("bump", END)
    source = "async def block():\n" + textwrap.indent(code, "    ") + "    return graph\n"
    namespace: dict[str, Any] = {
        "open_store": open_store,
        "builder": builder,
        "inputs": {"count": 41},
    }
    exec(compile(source, "README.md", "exec"), namespace)
    monkeypatch.chdir(tmp_path)  # the block's relative sessions.db
    await namespace["block"]()
    async with open_store("sqlite:///sessions.db", types=langgraph_types()) as store:
        async with EventlogSaver(store) as saver:
            graph = builder.compile(checkpointer=saver)
            state = await graph.aget_state({"configurable": {"thread_id": "chat 42"}})
    assert state.values == {"count": 42}
