"""Every public method of the LangGraph ``EventlogSaver``, fed hostile values: a call is
accepted, or refused with a typed error that leaves the SQLite file row for row as it was
(after a flush), the thread's checkpoints as they were, and a retry is refused the same way
without adding a copy. And every thread id a user could pass names one session of its own, or
is refused up front."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, empty_checkpoint

from agent.integrations.langgraph import EventlogSaver, langgraph_types, session_id_for
from eventlog import EventLogError, ValidationError, open_store, validate_session_id
from tests.conftest import SOAK
from tests.refusals import LONE, MAX_EVENT_BYTES, dump, hostile, planted, thread_ids

pytestmark = pytest.mark.anyio
#: Examples per method: a few in the suite, many in a soak run (``EVENTLOG_SOAK=1``).
EXAMPLES = 200 if SOAK else 10

SEEDED = "t1"


def _config(thread: Any = SEEDED, **more: Any) -> RunnableConfig:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": "", **more}}


def _checkpoint(number: int, values: Any = None) -> Checkpoint:
    checkpoint = empty_checkpoint()
    checkpoint["id"] = f"1ef-{number:04d}"
    checkpoint["channel_values"] = {"count": number} if values is None else values
    checkpoint["channel_versions"] = {"count": number + 1}
    return checkpoint


#: A config as LangGraph passes one: the templates hostile values are planted in.
CONFIG = {"configurable": {"thread_id": SEEDED, "checkpoint_ns": "", "checkpoint_id": "1ef-0001"}}
Call = Callable[[], Awaitable[Any]]


def _call(draw: Callable[..., Any], method: str, saver: EventlogSaver) -> Call:
    """``method`` with hostile arguments drawn for it, as a call that can be made again with
    the same arguments (a sync method runs on a worker thread, as LangGraph calls it)."""

    def config() -> Any:
        return draw(st.one_of(planted(CONFIG), st.builds(_config, thread_ids())))

    def sync(fn: Callable[[], Any]) -> Call:
        return lambda: anyio.to_thread.run_sync(fn)

    name = method.removeprefix("a") if method.startswith("a") and method != "aclose" else method
    is_async = name != method
    if name in ("put",):
        cfg, checkpoint = config(), _checkpoint(2, draw(planted({"count": 2, "log": ["x"]})))
        metadata = draw(st.one_of(st.just({}), planted({"step": 1, "source": "loop"})))
        versions = draw(st.one_of(st.just({"count": 3}), planted({"count": 3})))
        args: tuple[Any, ...] = (cfg, checkpoint, metadata, versions)
    elif name == "put_writes":
        writes = draw(st.one_of(planted([["count", 1], ["log", "x"]]), hostile()))
        task = draw(st.one_of(st.just("task-1"), hostile()))
        args = (config(), writes, task, draw(st.one_of(st.just(""), hostile())))
    elif name in ("get_tuple", "get"):
        args = (config(),)
    elif name == "list":
        cfg = draw(st.one_of(st.none(), st.just(config())))
        options = {
            "filter": draw(st.one_of(st.none(), planted({"source": "loop"}), hostile())),
            "before": draw(st.one_of(st.none(), st.just(config()))),
            "limit": draw(st.one_of(st.none(), st.integers(-1, 3), hostile())),
        }
        if is_async:
            return lambda: _drain(saver.alist(cfg, **options))
        return sync(lambda: list(saver.list(cfg, **options)))
    elif name == "delete_thread":
        args = (draw(thread_ids()),)
    elif name == "copy_thread":
        args = (draw(st.one_of(st.just(SEEDED), thread_ids())), draw(thread_ids()))
    elif name == "get_delta_channel_history":
        channels = draw(st.one_of(planted(["count"]), hostile()))
        cfg = config()
        if is_async:
            return lambda: saver.aget_delta_channel_history(config=cfg, channels=channels)
        return sync(lambda: saver.get_delta_channel_history(config=cfg, channels=channels))
    elif name == "get_next_version":
        current = draw(st.one_of(st.none(), st.just("00001.0"), hostile(), thread_ids()))
        return lambda: _now(saver.get_next_version, current, None)
    elif name in ("prune", "delete_for_runs"):
        args = (draw(st.lists(thread_ids(), max_size=2)),)
    elif name == "with_allowlist":
        args = (draw(st.one_of(planted([["m", "C"]]), hostile())),)
        return lambda: _now(saver.with_allowlist, *args)
    elif name == "thread_journal":  # async without the prefix: what the tool node calls
        thread_id = draw(thread_ids())
        return lambda: saver.thread_journal(thread_id)
    elif name == "run_sync":  # a sync method's bridge, called from a worker thread
        args = (saver.aget_tuple, config())
    elif name in ("from_conn_string", "sync_from_conn_string"):
        # Opens a store of its own: the seeded file is never touched, whatever the URL.
        url = draw(st.one_of(st.just("memory:"), hostile()))

        async def opened() -> None:
            async with EventlogSaver.from_conn_string(url) as other:
                await other.aget_tuple(_config())

        def opened_sync() -> None:
            with EventlogSaver.sync_from_conn_string(url) as other:
                other.get_tuple(_config())

        return opened if name == "from_conn_string" else sync(opened_sync)
    elif name == "config_specs":
        return lambda: _now(lambda: saver.config_specs)
    else:
        assert method == "aclose", method
        return saver.aclose
    bound = getattr(saver, method)
    return (lambda: bound(*args)) if is_async else sync(lambda: bound(*args))


async def _drain(iterator: Any) -> list[Any]:
    return [item async for item in iterator]


async def _now(fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)


def _public(cls: type) -> set[str]:
    return {
        name
        for name, value in inspect.getmembers(cls)
        if not name.startswith("_") and (callable(value) or isinstance(value, property))
    }


METHODS = sorted(_public(EventlogSaver))
#: Methods LangGraph's base class declares and this saver does not offer: they raise the
#: framework's documented ``NotImplementedError`` and touch nothing.
NOT_OFFERED = {"prune", "aprune", "delete_for_runs", "adelete_for_runs"}


def test_the_property_covers_every_public_method() -> None:
    # Every public method (own or inherited) is one the property below knows how to call.
    covered = {
        "aclose", "acopy_thread", "adelete_for_runs", "adelete_thread", "aget",
        "aget_delta_channel_history", "aget_tuple", "alist", "aprune", "aput", "aput_writes",
        "config_specs", "copy_thread", "delete_for_runs", "delete_thread", "get",
        "get_delta_channel_history", "get_next_version", "get_tuple", "list", "prune", "put",
        "put_writes", "run_sync", "thread_journal", "with_allowlist", "from_conn_string",
        "sync_from_conn_string",
    }  # fmt: skip
    assert set(METHODS) == covered


async def _state(saver: EventlogSaver) -> list[Any]:
    """What a reader of the seeded thread sees: every checkpoint tuple, newest first."""
    return [(t.checkpoint, t.metadata, t.pending_writes) async for t in saver.alist(_config())]


@pytest.mark.parametrize("method", METHODS)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
async def test_a_refused_call_changes_nothing_and_a_retry_adds_no_copy(
    tmp_path: Path, method: str, data: st.DataObject
) -> None:
    path = tmp_path / "store.db"
    path.unlink(missing_ok=True)  # examples share tmp_path: a fresh file each
    types = langgraph_types()
    async with (
        open_store(f"sqlite:///{path}", types=types, max_event_bytes=MAX_EVENT_BYTES) as store,
        EventlogSaver(store) as saver,
    ):
        # A thread with a checkpoint and a pending write.
        stored = await saver.aput(_config(), _checkpoint(1), {"source": "input"}, {"count": 2})
        await saver.aput_writes(stored, [("count", 5)], "task-0")
        # The file as it rests (no lease held: closing releases the thread's), and what a
        # reader sees (which opens the thread again, as the call finds it).
        await saver.aclose()
        before, state = dump(path), await _state(saver)
        call = _call(data.draw, method, saver)
        try:
            await call()
        except Exception as exc:
            note(f"refused: {exc!r}")
            # A refusal is typed (or the framework's own for what the saver does not offer) ...
            expected = NotImplementedError if method in NOT_OFFERED else EventLogError
            assert isinstance(exc, expected), f"{method} raised {exc!r}"
            # ... and changes nothing, once whatever was queued had its chance to be written.
            await saver.aclose()
            assert dump(path) == before
            assert await _state(saver) == state
            # A retry of the same call is refused the same way and adds no copy.
            with pytest.raises(type(exc)):
                await call()
            await saver.aclose()
            assert dump(path) == before


@given(st.one_of(thread_ids(), st.text(max_size=200)))
def test_every_thread_id_names_a_valid_session_or_is_refused_up_front(thread_id: Any) -> None:
    try:
        session_id = session_id_for(thread_id)
    except ValidationError as exc:
        # Refused: not text, or text with no UTF-8 form (the message says which).
        assert not isinstance(thread_id, str) or "lone surrogate" in str(exc)
        return
    # Never an id the store refuses later.
    assert validate_session_id(session_id) == session_id


@given(st.lists(st.one_of(thread_ids(), st.text(max_size=30)), min_size=2, max_size=6))
def test_distinct_thread_ids_name_distinct_sessions(thread_ids_: list[Any]) -> None:
    mapped: dict[str, str] = {}
    for thread_id in thread_ids_:
        try:
            session_id = session_id_for(thread_id)
        except ValidationError:
            continue
        # One session per text: no two texts (not even after a normalisation) share one.
        assert mapped.setdefault(session_id, thread_id) == thread_id


async def test_awkward_thread_ids_are_threads_of_their_own(tmp_path: Path) -> None:
    awkward = ["t", "t\n", "t\r\n", "T", "\u00e9", "e\u0301", "a" * 10_000, "lgh-" + "0" * 64]
    path = tmp_path / "store.db"
    async with (
        open_store(f"sqlite:///{path}", types=langgraph_types()) as store,
        EventlogSaver(store) as saver,
    ):
        # Each is a thread of its own: a checkpoint put under it reads back under it only.
        for number, thread_id in enumerate(awkward):
            await saver.aput(_config(thread_id), _checkpoint(number), {}, {"count": number + 1})
        for number, thread_id in enumerate(awkward):
            found = await saver.aget_tuple(_config(thread_id))
            assert found is not None and found.checkpoint["id"] == f"1ef-{number:04d}"
        # A lone surrogate is refused before anything is written, by every method.
        await saver.aclose()
        before = dump(path)
        with pytest.raises(ValidationError, match="lone surrogate") as caught:
            await saver.aput(_config(f"t{LONE}"), _checkpoint(9), {}, {"count": 1})
        assert "at the thread id" in str(caught.value)
        with pytest.raises(ValidationError, match="lone surrogate"):
            await saver.adelete_thread(LONE)
        with pytest.raises(ValidationError, match="lone surrogate"):
            await saver.aget_tuple(_config(LONE))
        await saver.aclose()
        assert dump(path) == before


async def test_a_value_too_deep_to_print_is_refused_by_name(tmp_path: Path) -> None:
    # Nested far past Python's recursion limit: even repr fails on it.
    deep: Any = 1
    for _ in range(100_000):
        deep = [deep]
    path = tmp_path / "store.db"
    async with (
        open_store(f"sqlite:///{path}", types=langgraph_types()) as store,
        EventlogSaver(store) as saver,
    ):
        stored = await saver.aput(_config(), _checkpoint(1), {}, {"count": 2})
        await saver.aclose()
        before = dump(path)
        # Each refusal is typed and its message is short, whatever the value.
        for call in (
            lambda: saver.aput_writes(stored, [("count", deep)], "task"),
            lambda: saver.aput(_config(), _checkpoint(2, {"count": deep}), {}, {"count": 3}),
            lambda: saver.aget_delta_channel_history(config=_config(), channels=deep),
            lambda: saver.adelete_thread(deep),
        ):
            with pytest.raises(ValidationError) as caught:
                await call()
            assert len(str(caught.value)) < 400
        with pytest.raises(ValidationError, match="a `list` is not a channel version"):
            saver.get_next_version(deep, None)
        await saver.aclose()
        assert dump(path) == before
