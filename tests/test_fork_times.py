"""A fork's times: its ``session/forked`` is never stamped before the child was created.

The clock the store reads is replaced, for the fork call only, by one that moves a millisecond
forward at every reading: a fork that read it twice (once for the marker, once for the
creation time) would stamp the marker a millisecond before the session it opens. Every store.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from eventlog import Session, StepEnd, StepStart, TurnEnd, TurnStart, open_store
from eventlog.stores import _fork
from tests.pg_children.server import fresh_schema, store_url

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "memory":
        yield "memory:"
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fork.db'}"
    else:
        with fresh_schema() as schema:
            yield store_url(schema)


class SteppingClock:
    """``time.time_ns`` that starts at ``start_ms`` and moves 1 ms forward per reading."""

    def __init__(self, start_ms: int) -> None:
        self.next_ms = start_ms
        self.readings = 0

    def time_ns(self) -> int:
        self.readings += 1
        now = self.next_ms
        self.next_ms += 1
        return now * 1_000_000


def _turn(session: Session, turn: int) -> None:
    session.append("turn/start", TurnStart(turn=turn))
    session.append("step/start", StepStart(turn=turn, step=1))
    session.append("step/end", StepEnd(turn=turn, step=1))
    session.append("turn/end", TurnEnd(turn=turn, reason="completed"))


@pytest.mark.parametrize("clock_offset_ms", [10_000, -10_000])
async def test_the_forked_marker_is_not_older_than_the_child(
    url: str, monkeypatch: pytest.MonkeyPatch, clock_offset_ms: int
) -> None:
    async with open_store(url) as store:
        # A parent of two closed turns.
        parent = await store.create(session_id="p")
        _turn(parent, 1)
        _turn(parent, 2)
        await parent.flush()
        last_parent_time = parent.window().event(parent.head).time
        # Fork with a clock that ticks at every reading: ahead of the parent's last event, or
        # behind it (another writer's clock was ahead of this one).
        clock = SteppingClock(last_parent_time + clock_offset_ms)
        with monkeypatch.context() as patch:
            patch.setattr(_fork, "time", SimpleNamespace(time_ns=clock.time_ns))
            child = await store.fork("p", boundary=3, child_id="c")
        assert clock.readings >= 1  # the fork did read the patched clock
        (info,) = [i for i in await store.list() if i.id == "c"]
        forked = child.window().event(child.head)
        assert forked.type == "session/forked"
        # The marker is at or after the child's creation, and after every copied event.
        assert forked.time >= info.created_at
        assert forked.time >= parent.window().event(3).time  # the last copied event (boundary 3)
        assert info.last_time == forked.time
        # The copied prefix keeps the parent's times.
        assert [e.time for e in await child.events()][:4] == [
            e.time for e in await parent.events()
        ][:4]
        # The creation time is the clock's (not the parent's future time).
        assert info.created_at == last_parent_time + clock_offset_ms
