"""A hypothesis state machine that checks a store against the memory store as model.

Rules: create a session, append, flush, read back, close-and-reopen, and crash-and-reopen (the
process dies: what was not flushed is gone, what was flushed is all there). The store under
test and the model get the same operations with the same clock; after every step their
sessions must agree on events, heads and durable watermarks. Any store plugs in through a
:class:`Storage` factory::

    def sqlite_storage() -> Storage:
        path = Path(tempfile.mkdtemp()) / "s.db"
        return Storage(
            make_store=lambda **options: open_store(f"sqlite:///{path}", **options),
            process_died=...,  # make the dead writer's leases look dead to a new process
            cleanup=lambda: shutil.rmtree(path.parent),
        )

    TestSQLiteMachine = store_machine(sqlite_storage).TestCase

Stores run in an event loop on a portal thread (:func:`anyio.from_thread.start_blocking_portal`),
because hypothesis drives rules synchronously and a store must live across rules.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import msgspec
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from .._errors import SessionExistsError
from .._event import APPEND
from .._message import Message
from .._session import Session
from .._vocabulary import TurnEnd, TurnStart, UserMessage
from ..stores import LogStore, MemoryBackend, MemoryData

__all__ = ("Storage", "store_machine")

#: The background writer never writes on its own: only flushes (and clean closes) write, so
#: the store under test and the model write the same rounds and a crash loses the same events.
_NEVER = 3600.0


def _nothing() -> None:
    return None


async def _nothing_async() -> None:
    return None


@dataclass(frozen=True)
class Storage:
    """One fresh place to keep data, used by one hypothesis example.

    :ivar make_store: ``make_store(**options)`` returns a new, not yet entered store over this
        data (the machine passes ``write_delay``).
    :ivar process_died: acts out what a new process finds after the old one was killed: the
        dead process's writer leases are takeover-able (e.g. rewrite them to a dead pid).
    :ivar cleanup: removes the data when the example ends.
    """

    make_store: Callable[..., LogStore]
    process_died: Callable[[], Awaitable[None]] = field(default=_nothing_async)
    cleanup: Callable[[], None] = field(default=_nothing)


class _Running:
    """A store entered on the portal's event loop, left with :meth:`close` or :meth:`crash`."""

    def __init__(self, portal: BlockingPortal, store: LogStore) -> None:
        self.portal = portal
        self.store = store
        self._context: AbstractContextManager[LogStore] = portal.wrap_async_context_manager(store)
        self._context.__enter__()

    def close(self) -> None:
        self._context.__exit__(None, None, None)

    def crash(self) -> None:
        # The process dies: the disk stops taking writes first, then the objects are dropped
        # (their final writes fail, which is what a dead process's writes do).
        self.portal.call(self.store.simulate_crash)
        self._context.__exit__(None, None, None)


def _dump(events: Any) -> list[Any]:
    return [msgspec.to_builtins(e) for e in events]


def store_machine(
    fresh: Callable[[], Storage], *, max_sessions: int = 3
) -> type[RuleBasedStateMachine]:
    """A state machine class comparing the stores ``fresh()`` provides with the memory store.

    Use its ``TestCase`` attribute as a test class.
    """

    class StoreMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.clock = 1_700_000_000_000
            self.known: list[str] = []
            self.pairs: dict[str, tuple[Session, Session]] = {}
            self._portal_context = start_blocking_portal("asyncio")
            self.portal = self._portal_context.__enter__()
            self.storage = fresh()
            self.model_data = MemoryData()
            self._open_stores()

        def teardown(self) -> None:
            try:
                self.sut.close()
                self.model.close()
            finally:
                self._portal_context.__exit__(None, None, None)
                self.storage.cleanup()

        # -- rules -----------------------------------------------------------------------------

        @rule(number=st.integers(0, max_sessions - 1))
        def create(self, number: int) -> None:
            session_id = f"s{number}"
            if session_id in self.known:
                for running in self._both:
                    try:
                        running.portal.call(partial(running.store.create, session_id))
                    except SessionExistsError:
                        continue
                    raise AssertionError(f"create({session_id!r}) twice was not refused")
                return
            note(f"create {session_id}")
            self.known.append(session_id)
            self.pairs[session_id] = (
                self.portal.call(partial(self.sut.store.create, session_id)),
                self.portal.call(partial(self.model.store.create, session_id)),
            )

        @precondition(lambda self: self.pairs)
        @rule(pick=st.integers(0), text=st.text(max_size=40), turn_start=st.booleans())
        def append(self, pick: int, text: str, turn_start: bool) -> None:
            session_id = self._pick(pick)
            self.clock += 1
            what = "turn start/end" if turn_start else repr(text)
            note(f"append to {session_id} at {self.clock}: {what}")
            for session in self.pairs[session_id]:
                grammar = session.grammar
                if turn_start and grammar.turn is None:
                    # The next turn opens (a well-formed log: append refuses anything else) ...
                    opening = TurnStart(turn=grammar.last_turn + 1)
                    call = partial(session.append, "turn/start", opening, time=self.clock)
                elif turn_start and grammar.turn is not None:
                    # ... or the open one closes.
                    closing = TurnEnd(turn=grammar.turn, reason="completed")
                    call = partial(session.append, "turn/end", closing, time=self.clock)
                else:
                    message = Message.user(text, id=f"m{self.clock}")
                    call = partial(
                        session.append,
                        "user/message",
                        UserMessage(message=message),
                        surface=APPEND,
                        time=self.clock,
                    )
                self.portal.call(call)

        @precondition(lambda self: self.pairs)
        @rule(pick=st.integers(0))
        def flush(self, pick: int) -> None:
            session_id = self._pick(pick)
            note(f"flush {session_id}")
            for session in self.pairs[session_id]:
                self.portal.call(session.flush)

        @precondition(lambda self: self.known)
        @rule(pick=st.integers(0))
        def read_back(self, pick: int) -> None:
            session_id = self.known[pick % len(self.known)]
            stored = [_dump(self.portal.call(self._read, r.store, session_id)) for r in self._both]
            assert stored[0] == stored[1], f"stored events of {session_id} differ"

        @rule()
        def reopen(self) -> None:
            note("close both stores cleanly and reopen every session")
            self.sut.close()
            self.model.close()
            self._restart()

        @rule()
        def crash_and_reopen(self) -> None:
            note("crash both stores and reopen every session")
            durable = {sid: pair[0].durable for sid, pair in self.pairs.items()}
            self.sut.crash()
            self.model_data = _snapshot(self.model_data)  # the model's disk as of now
            self.model.close()
            self.portal.call(self.storage.process_died)
            self._restart()
            for session_id, seq in durable.items():
                head = self.pairs[session_id][0].head
                assert head == seq, f"{session_id}: durable was {seq}, reopened at {head}"

        # -- checks ----------------------------------------------------------------------------

        @invariant()
        def stores_agree(self) -> None:
            for session_id, (sut, model) in self.pairs.items():
                assert (sut.head, sut.durable) == (model.head, model.durable), session_id
                assert sut.durable <= sut.head
                everything = self.portal.call(sut.events), self.portal.call(model.events)
                assert _dump(everything[0]) == _dump(everything[1]), session_id
                assert sut.last_hash == model.last_hash, session_id

        # -- helpers ---------------------------------------------------------------------------

        @property
        def _both(self) -> tuple[_Running, _Running]:
            return self.sut, self.model

        def _pick(self, pick: int) -> str:
            return sorted(self.pairs)[pick % len(self.pairs)]

        @staticmethod
        async def _read(store: LogStore, session_id: str) -> list[Any]:
            return [event async for event in store.read(session_id)]

        def _open_stores(self) -> None:
            self.sut = _Running(self.portal, self.storage.make_store(write_delay=_NEVER))
            self.model = _Running(
                self.portal, LogStore(MemoryBackend(self.model_data), write_delay=_NEVER)
            )

        def _restart(self) -> None:
            self._open_stores()
            self.pairs = {
                session_id: (
                    self.portal.call(self.sut.store.open, session_id),
                    self.portal.call(self.model.store.open, session_id),
                )
                for session_id in self.known
            }

    return StoreMachine


def _snapshot(data: MemoryData) -> MemoryData:
    """A copy of the memory store's durable state, without leases (a new process's view)."""
    return MemoryData(
        records=dict(data.records), rows={sid: list(rows) for sid, rows in data.rows.items()}
    )
