"""``EventlogSaver``: a LangGraph checkpointer whose checkpoints and writes are eventlog events.

Each LangGraph thread is one eventlog session (:func:`session_id_for`, the thread id kept in the
session's metadata). ``put`` appends a ``langgraph/checkpoint`` event, ``put_writes`` a
``langgraph/writes`` event, each flushed before the call returns. Reads are answered from an
index folded from those events that says where each value is (:class:`ThreadIndex`); the
values a read needs are read from the log and the answer is built from them with LangGraph's
public types only (:mod:`._langgraph_tuples`), the answers LangGraph's reference saver gives.

A thread's session is opened with the default (snapshot) open: it holds the events since its
latest snapshot, and a read of an older checkpoint reads it from the store.

Ordering is structural: one thread's events are committed in the order the calls were made
(a FIFO lock per thread covers loading the session and the synchronous ``append``), and a flush
makes a prefix of the log durable, so a checkpoint is never durable while a write committed
before it is not.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Coroutine, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
import msgspec
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_checkpoint_id,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from eventlog import (
    Session,
    SessionExistsError,
    SessionNotFoundError,
    Store,
    ValidationError,
    check_payload,
    open_store,
)

from ._langgraph_calls import (
    checked_channels,
    checked_limit,
    checked_thread,
    checkpoint_payload,
    configurable,
    last_message,
    thread_of,
    writes_put,
)
from ._langgraph_events import (
    CHECKPOINT,
    WRITES,
    Checkpointed,
    WritesPut,
    langgraph_types,
    register_langgraph_types,
    session_id_for,
)
from ._langgraph_index import Loaded, ThreadIndex
from ._langgraph_ledger import ToolLedger, end_turn
from ._langgraph_reads import PAGE, delta_history, read_page, read_tuple
from ._langgraph_sync import EventLoopThreadError, SyncMethods
from ._langgraph_tuples import delta_history_of, next_version
from ._types import shown

__all__ = ("EventLoopThreadError", "EventlogSaver")

T = TypeVar("T")
_METADATA_KEY = "langgraph"


class EventlogSaver(SyncMethods):
    """A LangGraph ``BaseCheckpointSaver`` on an eventlog store.

    Create it inside the event loop that runs the store, on a store opened with the saver's
    types::

        async with open_store(url, types=langgraph_types()) as store:
            graph = builder.compile(checkpointer=EventlogSaver(store))

    Guarantees: ``aput``/``aput_writes`` return once their event is durable (flushed); one
    thread's events are committed in call order, so writes are durable before any checkpoint
    put after them; concurrent calls (LangGraph's executor) are safe; the synchronous methods
    may be called from any other thread (they run on the store's loop and wait for it).
    The saver holds each thread's session open for writing (its lease) until
    :meth:`aclose` or :meth:`adelete_thread`; another process opening the same thread gets
    :class:`~eventlog.SessionBusyError`.

    Memory and time: a thread is opened from its latest snapshot; its index (a few ints per
    checkpoint) is folded by streaming the log once, when the thread is first touched, and
    each read then reads only the events its answer needs (from the store when they are
    older than what the session holds).

    Every method may raise, from the store: :class:`~eventlog.SessionBusyError` (another
    writer holds the thread's session), :class:`~eventlog.CorruptLogError` (the thread's log
    fails verification: from its latest snapshot on, as the default open checks it;
    ``eventlog verify`` checks the whole chain), :class:`~eventlog.ClosedError` (the store
    is closed); the writing ones :class:`~eventlog.StoreWriteError` (the flush failed: the
    event stays committed and queued, and the next flush writes it once) and
    :class:`~eventlog.ValidationError` (an event over the store's ``max_event_bytes``;
    nothing is committed).

    :raises ValidationError: the store was not opened with the saver's types
        (:func:`langgraph_types` / :func:`register_langgraph_types`); later, an argument
        LangGraph's types do not allow (a config without a string ``thread_id``, a thread id
        with a lone surrogate, a value the serializer cannot write, a payload no event can
        hold): refused before any session is opened or written, so the store is unchanged.
    :raises SessionExistsError: a thread's session id names a session that is not that
        thread's (its metadata says otherwise); nothing is written to it.
    """

    def __init__(self, store: Store, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde)
        types = getattr(store, "types", None)
        if types is None or CHECKPOINT not in types or WRITES not in types:
            raise ValidationError(
                f"the store does not know the event types {CHECKPOINT!r} and {WRITES!r}",
                hint="open it with open_store(url, types=langgraph_types())",
            )
        self._store = store
        self._threads: dict[str, _Thread] = {}
        self._locks: dict[str, anyio.Lock] = {}
        self._bind_loop()

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls, url: str, *, serde: SerializerProtocol | None = None, **store_options: Any
    ) -> AsyncIterator[Self]:
        """Open the store at ``url`` with the saver's types and yield a saver on it; on exit
        the saver's sessions and then the store are closed (as LangGraph's own
        ``AsyncSqliteSaver.from_conn_string``)::

            async with EventlogSaver.from_conn_string("sqlite:///sessions.db") as saver:
                graph = builder.compile(checkpointer=saver)

        ``store_options`` go to :func:`~eventlog.open_store` (``durability``,
        ``max_event_bytes`` ...); a ``types`` registry given there gets the saver's types
        registered in it.

        :raises ValidationError: ``types`` registers the saver's names with other payloads;
            whatever ``open_store`` raises for the URL and options.
        """
        types = store_options.pop("types", None)
        types = langgraph_types() if types is None else register_langgraph_types(types)
        async with open_store(url, types=types, **store_options) as store:
            async with cls(store, serde=serde) as saver:
                yield saver

    @classmethod
    @contextmanager
    def sync_from_conn_string(
        cls, url: str, *, serde: SerializerProtocol | None = None, **store_options: Any
    ) -> Iterator[Self]:
        """:meth:`from_conn_string` for synchronous code (``graph.invoke``, as LangGraph's
        ``SqliteSaver.from_conn_string``): the store runs on an event loop in a thread of
        its own for the block's lifetime, and the saver's sync methods wait for it::

            with EventlogSaver.sync_from_conn_string("sqlite:///sessions.db") as saver:
                builder.compile(checkpointer=saver).invoke(inputs, config)

        Only the sync API works on such a saver: its async methods belong to the loop thread.
        """
        with anyio.from_thread.start_blocking_portal() as portal:
            opened = cls.from_conn_string(url, serde=serde, **store_options)
            with portal.wrap_async_context_manager(opened) as saver:
                yield saver

    def __repr__(self) -> str:
        return f"EventlogSaver({len(self._threads)} threads open)"

    # -- sessions ------------------------------------------------------------------------------

    def _lock(self, thread_id: str) -> anyio.Lock:
        # anyio's Lock is FIFO: the calls of one thread commit in the order they were made.
        lock = self._locks.get(thread_id)
        if lock is None:
            lock = self._locks[thread_id] = anyio.Lock()
        return lock

    async def _session(self, thread_id: str, *, create: bool) -> Session | None:
        """The thread's open session, loading it on first use and folding its index by
        streaming the log (older events from the store: O(log) time once per thread, O(one
        event) of them in memory). Lock held."""
        thread = self._threads.get(thread_id)
        if thread is not None:
            return thread.session
        session_id = session_id_for(thread_id)
        index = ThreadIndex()
        try:
            # The default open: the latest snapshot and the events after it, the chain
            # verified from the snapshot's hash on. What is older is read when needed.
            session = await self._store.open(session_id)
        except SessionNotFoundError:
            if not create:
                return None
            metadata = {_METADATA_KEY: {"thread_id": thread_id}}
            session = await self._store.create(session_id=session_id, metadata=metadata)
        else:
            owner = session.metadata.get(_METADATA_KEY, {})
            if not isinstance(owner, dict) or owner.get("thread_id") != thread_id:
                await session.aclose()
                raise SessionExistsError(
                    f"session {session_id!r} is not LangGraph thread {thread_id!r}'s "
                    f"(its metadata says {owner!r})",
                    session_id=session_id,
                )
            try:
                async for event in session.read_events(0):
                    index.apply(event)
            except BaseException:
                # Not kept: release the lease, so that the next call opens it afresh.
                with anyio.CancelScope(shield=True):
                    await session.aclose()
                raise
        self._threads[thread_id] = _Thread(session, index)
        return session

    async def _load(self, thread_id: str) -> None:
        if thread_id not in self._threads:
            async with self._lock(thread_id):
                await self._session(thread_id, create=False)

    async def _load_all(self) -> None:
        """Load every LangGraph thread of the store (``list`` without a thread)."""
        after: str | None = None
        while True:
            page = await self._store.list(after=after, limit=100)
            for info in page:
                owner = info.metadata.get(_METADATA_KEY)
                if info.error is None and isinstance(owner, dict):
                    thread_id = owner.get("thread_id")
                    if isinstance(thread_id, str) and session_id_for(thread_id) == info.id:
                        await self._load(thread_id)
            if len(page) < 100:
                return
            after = page[-1].id

    def _check_first(self, thread_id: str, type_: str, payload: Any) -> None:
        """Check ``payload`` before the thread's session is opened or created (a refusal then
        changes nothing); an open thread's ``append`` checks it and commits nothing either."""
        if thread_id not in self._threads:
            check_payload(self._store, type_, payload, session_id=session_id_for(thread_id))

    async def _commit(self, thread_id: str, type_: str, payload: Any) -> Session:
        async with self._lock(thread_id):
            session = await self._session(thread_id, create=True)
            assert session is not None  # create=True
            self._threads[thread_id].index.apply(session.append(type_, payload))
        return session

    async def thread_journal(self, thread_id: str) -> tuple[Session, ToolLedger]:
        """The thread's open session (created when new) and the fold of its tool calls: what
        the crash-honest tool node writes through. Append to the session only without an
        ``await`` between reading the ledger and appending, and fold each appended event
        into the ledger (``ledger.apply``).

        :raises ValidationError: ``thread_id`` cannot name a session.
        """
        async with self._lock(checked_thread(thread_id)):
            session = await self._session(thread_id, create=True)
            assert session is not None  # create=True
            return session, self._threads[thread_id].index.tools

    # -- async API -----------------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (its ``checkpoint_id``, else the thread's latest)
        with its pending writes, or ``None``. Reads that checkpoint's event, the blobs of the
        channel versions it names and its writes: from the store when the session does not
        hold them."""
        thread_id = thread_of(config)
        await self._load(thread_id)
        thread = self._threads.get(thread_id)
        ns = config["configurable"].get("checkpoint_ns", "")
        wanted = get_checkpoint_id(config) or (thread.index.latest(ns) if thread else None)
        if thread is None or wanted is None or wanted not in thread.index.checkpoints.get(ns, {}):
            return None
        where = (thread.session, thread.index, thread_id, ns)
        return await read_tuple(self.serde, *where, wanted, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Checkpoints newest first, as LangGraph's reference saver lists them; without a
        ``config``, every thread of the store. Streams: the checkpoints are read (from the
        store when the session does not hold them) a page at a time as the caller iterates,
        and only as many as ``limit`` asks for; the ids listed are those stored when the call
        began (a put during the iteration does not show)."""
        left = checked_limit(limit)
        if filter is not None and not isinstance(filter, Mapping):
            raise ValidationError(f"Expected a mapping or None, got `{type(filter).__name__}`")
        if before is not None:
            configurable(before)
        if config is None:
            await self._load_all()
            threads = list(self._threads)
        else:
            threads = [thread_of(config)]
            await self._load(threads[0])
        config_ns = config["configurable"].get("checkpoint_ns") if config else None
        only = get_checkpoint_id(config) if config else None
        below = get_checkpoint_id(before) if before else None
        for thread_id in threads:
            thread = self._threads.get(thread_id)
            if thread is None:
                continue
            session, index = thread.session, thread.index
            for ns, entries in list(index.checkpoints.items()):
                if config_ns is not None and ns != config_ns:
                    continue
                ids = sorted(
                    (i for i in entries if (not only or i == only) and (not below or i < below)),
                    reverse=True,
                )
                for start in range(0, len(ids), PAGE):
                    if left is not None and left <= 0:
                        return
                    chunk = ids[start : start + PAGE]
                    page = await read_page(self.serde, session, index, thread_id, ns, chunk, filter)
                    for item in page[:left] if left is not None else page:
                        yield item
                    if left is not None:
                        left -= len(page)

    def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Coroutine[Any, Any, RunnableConfig]:
        """Log the checkpoint (and the values of the channels in ``new_versions``); the
        awaitable returns once it is durable.

        The checkpoint is serialized when ``aput`` is called, before anything yields: what is
        stored is what the graph handed over at that moment, even when the graph goes on
        mutating the objects it passed (LangGraph's ``durability="async"`` and ``"exit"``).
        """
        thread_id = thread_of(config)
        payload = checkpoint_payload(self.serde, config, checkpoint, metadata, new_versions)
        return self._put(thread_id, payload, last_message(checkpoint))

    async def _put(self, thread_id: str, payload: Checkpointed, last: Any) -> RunnableConfig:
        self._check_first(thread_id, CHECKPOINT, payload)
        session = await self._commit(thread_id, CHECKPOINT, payload)
        # The model's answer ends a turn the crash-honest tool node opened (the journal).
        end_turn(session, self._threads[thread_id].index.tools, last)
        await session.flush()
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": payload.ns,
                "checkpoint_id": payload.id,
            }
        }

    def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> Coroutine[Any, Any, None]:
        """Log a task's writes against the checkpoint ``config`` names; the awaitable returns
        once they are durable. A regular write already stored for the same task and index is
        kept; a special one (error, interrupt) replaces the stored one. The values are
        serialized when ``aput_writes`` is called, as :meth:`aput`'s are."""
        thread_id = thread_of(config, required=("checkpoint_id",))
        whole = writes_put(self.serde, config, writes, task_id, task_path)
        return self._put_writes(thread_id, whole)

    async def _put_writes(self, thread_id: str, whole: WritesPut) -> None:
        self._check_first(thread_id, WRITES, whole)
        async with self._lock(thread_id):
            session = await self._session(thread_id, create=True)
            assert session is not None  # create=True
            index = self._threads[thread_id].index
            stored = index.writes.get((whole.ns, whole.checkpoint_id), {})
            kept = [w for w in whole.writes if w.idx < 0 or (whole.task_id, w.idx) not in stored]
            if kept:
                payload = msgspec.structs.replace(whole, writes=kept)
                index.apply(session.append(WRITES, payload))
        # Also when nothing was new: the call that logged them may not have flushed yet.
        await session.flush()

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete the thread: its session and every event in it are removed from the store.
        A thread that does not exist is not an error."""
        async with self._lock(checked_thread(thread_id)):
            session = await self._session(thread_id, create=False)
            if session is not None:
                self._threads.pop(thread_id, None)
                await session.aclose()
                await self._store.delete(session.id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Append every checkpoint and write of the source thread (as of the call) to the
        target thread, in their order, and return once they are durable. Streams the source's
        log (older events from the store) a page at a time. A source that does not exist
        copies nothing."""
        checked_thread(target_thread_id)
        async with self._lock(checked_thread(source_thread_id)):
            source = await self._session(source_thread_id, create=False)
            stop = -1 if source is None else source.head + 1
        seq = 0
        while source is not None and seq < stop:
            page = [e async for e in source.read_events(seq, min(_PAGE_EVENTS, stop - seq))]
            seq = page[-1].seq + 1 if page else stop
            ours = [e for e in page if e.type in _OURS]
            if ours:
                async with self._lock(target_thread_id):
                    target = await self._session(target_thread_id, create=True)
                    assert target is not None  # create=True
                    index = self._threads[target_thread_id].index
                    for event in ours:
                        index.apply(target.append(event.type, event.data))
                await target.flush()

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """LangGraph's ``DeltaChannel`` history (beta), as its reference saver answers it: the
        checkpoint's ancestors are read (from the store when the session does not hold them)
        back to the nearest one holding a value of each channel, or to the root."""
        thread_id, channels = thread_of(config), checked_channels(channels)
        await self._load(thread_id)
        thread = self._threads.get(thread_id)
        ns = config["configurable"].get("checkpoint_ns", "")
        target = get_checkpoint_id(config) or (thread.index.latest(ns) if thread else None)
        if thread is None or target not in thread.index.checkpoints.get(ns, {}):
            return delta_history_of(self.serde, Loaded(), [], channels)  # no ancestors
        assert target is not None
        return await delta_history(self.serde, thread.session, thread.index, ns, target, channels)

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Versions as LangGraph's reference saver makes them: sortable strings.

        :raises ValidationError: ``current`` is not a version this saver made.
        """
        try:
            return next_version(current)
        except (TypeError, ValueError, AttributeError) as exc:
            raise ValidationError(f"{shown(current)} is not a channel version") from exc

    async def aclose(self) -> None:
        """Close every session the saver opened (their leases are released). The store stays
        open; it is the caller's."""
        threads, self._threads = list(self._threads.values()), {}
        for thread in threads:
            await thread.session.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


@dataclass(frozen=True, slots=True)
class _Thread:
    """An open thread: its session and the index folded from it (kept together: the index
    is valid exactly as long as the session is open here)."""

    session: Session
    index: ThreadIndex


_OURS = frozenset({CHECKPOINT, WRITES})
#: Events read per page when a thread is copied.
_PAGE_EVENTS = 512
