"""Conformance cases: a session's life in a store. Create and open, a restart that loses
nothing flushed, one writer at a time, reading, listing and following, fork and delete.
"""

from __future__ import annotations

import anyio
import pytest

from .._errors import SessionBusyError, SessionExistsError, SessionNotFoundError, ValidationError
from ._helpers import append_turn, append_user, assert_same
from ._hooks import StoreHooks

__all__ = ("SessionCases",)


class SessionCases(StoreHooks):
    """The cases of creating, reopening, reading, forking and deleting sessions."""

    # -- create and open -----------------------------------------------------------------------

    async def tamper_attachment(self, digest: str) -> None:
        """Flip one byte of the stored bytes of attachment ``digest`` (a side door)."""
        raise NotImplementedError

    async def test_create_gives_an_empty_writable_session(self) -> None:
        async with self.make_store() as store:
            session = await store.create(session_id="s-1", metadata={"app": "demo"})
            assert (session.id, session.head, session.durable) == ("s-1", -1, -1)
            assert session.metadata == {"app": "demo"}
            assert repr(session) == "<Session 's-1' head=-1 durable=-1>"

    async def test_create_refuses_a_taken_or_malformed_id(self) -> None:
        async with self.make_store() as store:
            await store.create(session_id="taken")
            with pytest.raises(SessionExistsError, match="session 'taken' already exists"):
                await store.create(session_id="taken")
            with pytest.raises(ValidationError, match=r"session id '\.\./etc' is not valid"):
                await store.create(session_id="../etc")

    async def test_flushed_events_survive_a_restart_exactly(self) -> None:
        # Write a turn and flush it.
        async with self.make_store() as store:
            session = await store.create(session_id="s")
            append_turn(session, 1)
            await session.flush()
            assert session.durable == session.head == 4
            written, last_hash = list(await session.events()), session.last_hash
        # A new store over the same data loads the same events and chain.
        async with self.make_store() as store:
            again = await store.open("s")
            assert_same(list(await again.events()), written)
            assert again.last_hash == last_hash
            assert (again.head, again.durable) == (4, 4)
            assert again.surface_index.nodes == [1]
            # It continues the log where it stopped.
            append_turn(again, 2)
            await again.flush()
        async with self.make_store() as store:
            assert (await store.open("s")).head == 9

    async def test_closing_the_store_writes_what_was_committed(self) -> None:
        async with self.make_store() as store:
            session = await store.create(session_id="s")
            append_turn(session, 1)
        async with self.make_store() as store:
            assert (await store.open("s")).head == 4

    async def test_open_of_a_missing_session_names_it(self) -> None:
        async with self.make_store() as store:
            with pytest.raises(SessionNotFoundError, match="session 'nope' does not exist"):
                await store.open("nope")

    async def test_a_second_writer_is_refused_until_the_first_closes(self) -> None:
        async with self.make_store() as store:
            first = await store.create(session_id="s")
            with pytest.raises(SessionBusyError):
                await store.open("s")
            # Another store in this same process is refused too.
            async with self.make_store() as other:
                with pytest.raises(SessionBusyError):
                    await other.open("s")
            await first.aclose()
            second = await store.open("s")
            assert second.head == -1

    async def test_concurrent_flushes_share_one_barrier(self) -> None:
        async with self.make_store() as store:
            a, b = await store.create(session_id="a"), await store.create(session_id="b")
            for i in range(50):
                append_user(a, f"a{i}")
                append_user(b, f"b{i}")
            async with anyio.create_task_group() as tg:
                for session in (a, b, a, b):
                    tg.start_soon(session.flush)
            assert (a.durable, b.durable) == (49, 49)

    async def test_the_background_writer_flushes_without_being_asked(self) -> None:
        async with self.make_store(write_delay=0.001) as store:
            session = await store.create(session_id="s")
            append_user(session, "hi")
            # follow() yields only stored events: seeing it means the writer stored it unasked.
            with anyio.fail_after(10):
                async for event in store.follow("s"):
                    assert event.seq == 0
                    break

    # -- reading -------------------------------------------------------------------------------

    async def test_read_streams_a_range_without_the_lease(self) -> None:
        async with self.make_store() as store:
            session = await store.create(session_id="s")
            for i in range(30):
                append_user(session, f"m{i}")
            await session.flush()
            seqs = [e.seq async for e in store.read("s", from_seq=10, limit=5)]
            assert seqs == [10, 11, 12, 13, 14]
            everything = [e async for e in store.read("s")]
            assert_same(everything, list(await session.events()))
            with pytest.raises(SessionNotFoundError):
                [e async for e in store.read("missing")]

    async def test_list_is_paginated_by_id(self) -> None:
        async with self.make_store() as store:
            for name in ("c", "a", "e", "b", "d"):
                await store.create(session_id=name)
            first = await store.list(limit=2)
            assert [i.id for i in first] == ["a", "b"]
            rest = await store.list(after="b", limit=10)
            assert [i.id for i in rest] == ["c", "d", "e"]
            with pytest.raises(ValidationError, match="list limit must be at least 1"):
                await store.list(limit=0)

    async def test_list_pages_walk_every_session_once_in_id_order(self) -> None:
        async with self.make_store() as store:
            names = ["k", "b2", "b10", "a", "zz", "m", "b1", "a0"]
            for name in names:
                await (await store.create(session_id=name)).aclose()
            # A deleted session leaves the pages; one created again comes back in its place.
            await store.delete("m")
            await store.delete("zz")
            await (await store.create(session_id="zz")).aclose()
            pages, after = [], None
            while True:
                page = await store.list(after=after, limit=3)
                pages.append([i.id for i in page])
                if len(page) < 3:
                    break
                after = page[-1].id
            assert pages == [["a", "a0", "b1"], ["b10", "b2", "k"], ["zz"]]
            # A page may start after an id that is not stored.
            assert [i.id for i in await store.list(after="b3", limit=10)] == ["k", "zz"]
            assert await store.list(after="zz") == []

    async def test_list_reports_heads_and_last_activity(self) -> None:
        async with self.make_store() as store:
            session = await store.create(session_id="s")
            append_turn(session, 1)
            await session.flush()
            (info,) = await store.list()
            assert (info.id, info.head, info.error) == ("s", 4, None)
            assert info.last_time == (await session.events())[-1].time

    async def test_follow_yields_stored_then_live_events_once_each(self) -> None:
        async with self.make_store(write_delay=0.001) as store:
            session = await store.create(session_id="s")
            for i in range(3):
                append_user(session, f"before {i}")
            await session.flush()
            seen: list[int] = []

            async def follow() -> None:
                async for event in store.follow("s", after=0):
                    seen.append(event.seq)
                    if event.seq == 7:
                        return

            with anyio.fail_after(20):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(follow)
                    for i in range(5):
                        append_user(session, f"live {i}")
                        await session.flush()
            assert seen == [1, 2, 3, 4, 5, 6, 7]

    # -- fork and delete -----------------------------------------------------------------------

    async def test_fork_copies_the_prefix_and_marks_the_child(self) -> None:
        async with self.make_store() as store:
            parent = await store.create(session_id="p")
            append_turn(parent, 1)
            append_turn(parent, 2)
            await parent.flush()
            child = await store.fork("p", boundary=4)
            events = list(await child.events())
            assert [e.seq for e in events] == list(range(6))
            assert_same(events[:5], list(await parent.events())[:5])
            assert events[5].type == "session/forked"
            assert (events[5].data.parent, events[5].data.boundary) == ("p", 4)
            append_turn(child, 2, "a different second turn")
            await child.flush()
            (info,) = [i for i in await store.list() if i.id == child.id]
            assert (info.parent_id, info.fork_seq, info.head) == ("p", 4, 10)
            assert parent.head == 9

    async def test_fork_refuses_a_boundary_inside_an_open_turn_or_outside_the_log(self) -> None:
        async with self.make_store() as store:
            parent = await store.create(session_id="p")
            append_turn(parent, 1)
            await parent.flush()
            with pytest.raises(ValidationError, match="fork boundary 2 is inside turn 1"):
                await store.fork("p", boundary=2)
            with pytest.raises(ValidationError, match="fork boundary 9 is outside"):
                await store.fork("p", boundary=9)

    async def test_delete_removes_a_closed_session(self) -> None:
        async with self.make_store() as store:
            session = await store.create(session_id="s")
            append_turn(session, 1)
            with pytest.raises(SessionBusyError):
                await store.delete("s")
            await session.aclose()
            await store.delete("s")
            with pytest.raises(SessionNotFoundError):
                await store.open("s")
            with pytest.raises(SessionNotFoundError):
                await store.delete("s")
            assert await store.list() == []
