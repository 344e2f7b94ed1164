"""Conformance cases: writers that go wrong. A stale writer is fenced without harming the
others in its write round, one unstorable row fails only its own session, a recreated session
never receives a stale writer's events, a closed session refuses to flush, and an open waits
for a live writer to let go.
"""

from __future__ import annotations

import anyio
import pytest

from .._errors import ClosedError, ConflictError, SessionBusyError, StoreWriteError, ValidationError
from .._session import Session
from ._helpers import append_user, lease_refusals, plant_unstorable_time, user_texts
from ._hooks import StoreHooks

__all__ = ("WriterCases",)


class WriterCases(StoreHooks):
    """The cases of stale, failing, closed and waiting writers."""

    # -- single writer -------------------------------------------------------------------------

    async def test_a_stale_writer_is_fenced_and_others_in_its_batch_are_not(self) -> None:
        async with self.make_store() as store, self.make_store() as other:
            stale = await store.create(session_id="s")
            bystander = await store.create(session_id="b")
            append_user(stale, "first")
            await stale.flush()
            # The stale writer's lease is lost (as after an expiry) and another writer moves on.
            await store.drop_lease("s")
            winner = await other.open("s")
            append_user(winner, "winner")
            await winner.flush()
            # The stale writer and a bystander commit into the same write round.
            append_user(stale, "loser")
            append_user(bystander, "unaffected")
            with pytest.raises(ConflictError, match="another writer advanced the stored log"):
                await stale.flush()
            await bystander.flush()
            assert bystander.durable == 0
            with pytest.raises(ConflictError):
                append_user(stale, "again")
            stored = [e async for e in other.read("s")]
            assert [e.data.message.text for e in stored] == ["first", "winner"]

    # -- hardening: one bad row, stale writers, closed sessions, waiting for a lease ------------

    async def test_an_unstorable_row_fails_only_its_own_session(self) -> None:
        async with self.make_store(write_delay=3600) as store:
            bad = await store.create(session_id="bad")
            good = await store.create(session_id="good")
            # Both sessions commit into the same round: one good event, then the bad row.
            append_user(bad, "kept")
            plant_unstorable_time(bad)
            append_user(good, "one")
            append_user(good, "two")
            # The bad session's flush names the seq and the cause; the round wrote the others.
            with pytest.raises(StoreWriteError) as caught:
                await bad.flush()
            assert caught.value.seq == 1
            assert caught.value.message == (
                "session 'bad', seq 1: the event cannot be stored: time 9223372036854775808 "
                "is not a 64-bit integer; this session is fenced (events from seq 1 on are "
                "not written)"
            )
            await good.flush()
            assert (good.durable, bad.durable) == (1, 0)
            # The bad session stays fenced, with the same error; the good one keeps writing.
            with pytest.raises(StoreWriteError, match="seq 1: the event cannot be stored"):
                append_user(bad, "after")
            append_user(good, "three")
            await good.flush()
        # Reopened: everything flushed is there, the bad row nowhere.
        async with self.make_store() as store:
            assert await user_texts(store, "good") == ["one", "two", "three"]
            reopened = await store.open("bad")
            assert [e.type for e in await reopened.events()] == ["user/message"]
            await reopened.aclose()

    async def test_a_stale_writer_never_writes_into_a_recreated_session(self) -> None:
        async with self.make_store() as first, self.make_store() as second:
            # The first store writes the session and keeps it open (it holds the lease).
            stale = await first.create(session_id="s")
            append_user(stale, "old")
            await stale.flush()
            # Another store may not delete a session a live writer holds...
            with pytest.raises(SessionBusyError, match=r"is open for writing by .*; not deleted"):
                await second.delete("s")
            with pytest.raises(ValidationError, match="force must be True or False"):
                await second.delete("s", force="yes")  # type: ignore[arg-type]
            assert await user_texts(second, "s") == ["old"]
            # ...unless forced. It creates the session again and writes one event: the stored
            # head is now 0, the very head the stale writer expects.
            await second.delete("s", force=True)
            fresh = await second.create(session_id="s")
            append_user(fresh, "new")
            await fresh.flush()
            # The stale writer's next flush is fenced; nothing of it lands in the new session.
            append_user(stale, "stale")
            with pytest.raises(ConflictError):
                await stale.flush()
            assert await user_texts(second, "s") == ["new"]
            append_user(fresh, "newer")
            await fresh.aclose()
            await stale.aclose()
        async with self.make_store() as store:
            reopened = await store.open("s")
            assert [e.data.message.text for e in await reopened.events()] == ["new", "newer"]
            await reopened.aclose()

    async def test_a_session_whose_writer_is_gone_can_be_deleted(self) -> None:
        async with self.make_store() as store:
            await (await store.create(session_id="s")).aclose()
        # Free (closed), and held by this very store: both deletable without force.
        async with self.make_store() as store:
            await store.delete("s")
            session = await store.create(session_id="s")
            with pytest.raises(SessionBusyError, match="open for writing in this store"):
                await store.delete("s")
            await session.aclose()
            await store.delete("s")

    async def test_flush_after_close_raises(self) -> None:
        async with self.make_store() as store:
            session = await store.create(session_id="s")
            append_user(session, "a")
            await session.aclose()
            with pytest.raises(ClosedError, match="session 's' is closed"):
                await session.flush()
            left_open = await store.create(session_id="t")
        with pytest.raises(ClosedError):
            await left_open.flush()

    async def test_open_waits_for_a_live_writer_to_let_go(self) -> None:
        async with self.make_store() as first, self.make_store() as second:
            holder = await first.create(session_id="s")
            append_user(holder, "a")
            # Without waiting, a live lease is refused at once; a short wait runs out.
            with pytest.raises(SessionBusyError):
                await second.open("s")
            with pytest.raises(SessionBusyError):
                await second.open("s", wait=0.1)
            for bad in (-1, float("nan"), float("inf"), 10**400, True, "1"):
                with pytest.raises(ValidationError, match="wait must be a number of seconds"):
                    await second.open("s", wait=bad)  # type: ignore[arg-type]
            # A waiting open returns once the holder closes; the holder closes only after the
            # waiter was refused at least once (the store says so), so it really waited.
            refused = lease_refusals(second)
            opened: list[Session] = []
            async with anyio.create_task_group() as tg:

                async def wait_and_open() -> None:
                    opened.append(await second.open("s", wait=60))

                tg.start_soon(wait_and_open)
                await refused.wait()
                await holder.aclose()
            assert [e.type for e in await opened[0].events()] == ["user/message"]
            await opened[0].aclose()
