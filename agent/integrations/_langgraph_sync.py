"""The synchronous half of the LangGraph saver: each method runs its async twin on the loop
that owns the store, from another thread (what LangGraph's ``graph.invoke`` calls).

:class:`SyncMethods` is a mixin of :class:`~._langgraph_saver.EventlogSaver`; it holds the
loop's token and thread, taken when the saver is made inside that loop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import anyio.from_thread
import anyio.lowlevel
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)

from eventlog import EventLogError

__all__ = ("EventLoopThreadError", "SyncMethods")

T = TypeVar("T")


class EventLoopThreadError(EventLogError, RuntimeError):
    """A synchronous saver method was called on the event loop thread that owns the store:
    it would wait for that loop while blocking it. Use the ``a``-prefixed method there."""


class SyncMethods(BaseCheckpointSaver[str]):
    """``get_tuple``, ``list``, ``put``, ``put_writes``, ``delete_thread``, ``copy_thread``
    and ``get_delta_channel_history``, each waiting for its ``a``-twin on the store's loop.

    :raises EventLoopThreadError: called on the loop's own thread (it would block the loop
        it waits for).
    """

    def _bind_loop(self) -> None:
        """Remember the running loop (call inside it, when the saver is made)."""
        self._token = anyio.lowlevel.current_token()
        self._loop_thread = threading.get_ident()

    def run_sync(self, fn: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
        """Run ``fn(*args)`` on the store's loop from another thread and return its result.

        :raises EventLoopThreadError: called on the loop's own thread.
        """
        return self._run(fn, *args)

    async def _list(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> list[CheckpointTuple]:
        return [t async for t in self.alist(config, filter=filter, before=before, limit=limit)]

    def _run(self, fn: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
        self._off_loop()
        return anyio.from_thread.run(fn, *args, token=self._token)

    def _off_loop(self) -> None:
        if threading.get_ident() == self._loop_thread:
            raise EventLoopThreadError(
                "a synchronous EventlogSaver method was called on the event loop thread that "
                "runs the store; it would block the loop it waits for",
                hint="use the async methods there (aget_tuple, aput, graph.ainvoke ...)",
            )

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._run(self.aget_tuple, config)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        # Taken whole on the loop (within ``limit``): the iterator runs on the caller's thread.
        yield from self._run(self._list, config, filter, before, limit)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        # Serialized here, on the caller's thread, before it waits (see ``aput``).
        self._off_loop()
        stored: RunnableConfig = self._run(
            _awaited, self.aput(config, checkpoint, metadata, new_versions)
        )
        return stored

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._off_loop()
        self._run(_awaited, self.aput_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self._run(self.adelete_thread, thread_id)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._run(self.acopy_thread, source_thread_id, target_thread_id)

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        async def history() -> Mapping[str, DeltaChannelHistory]:
            return await self.aget_delta_channel_history(config=config, channels=channels)

        return self._run(history)


async def _awaited(coroutine: Coroutine[Any, Any, T]) -> T:
    """Await a coroutine made on another thread (its arguments captured there)."""
    return await coroutine
