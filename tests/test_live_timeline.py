"""A long-lived session's timeline (docs/stores.md, "A long-lived session"): when a live session
drops from memory the events a snapshot covers, its cached timeline forgets what a timeline
restored from that snapshot would not hold (the answered calls of closed steps), so it stays
as bounded as the events; it then answers exactly what a session reopened from the snapshot
answers, and a :class:`Timeline` a reader already holds never changes."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import msgspec
import pytest
from hypothesis import event, given, note
from hypothesis import strategies as st

from eventlog import (
    APPEND,
    AssistantMessage,
    Event,
    Message,
    Replace,
    Session,
    SnapshotState,
    StepEnd,
    StepStart,
    ToolCall,
    ToolCallPart,
    ToolResult,
    TurnStart,
    UserMessage,
    open_store,
)
from eventlog.stores import MemoryData
from projections import SNAPSHOT_STATES, Timeline, inbox, request_header, timeline
from projections._timeline import TIMELINE, TimelineState
from projections.base import catch_up, fold
from projections.header import REQUEST_HEADER
from projections.inbox import INBOX, enqueue
from recovery import repair, scan
from recovery.testing import AgentRun, agent_runs
from tests.test_live_trim import TRIMMING, full_log, live_run
from tests.three_stores import Opener, stores

__all__ = ("stores",)

pytestmark = pytest.mark.anyio


def answers(line: Timeline, keys: Iterable[tuple[int, int, str]]) -> tuple[Any, ...]:
    """Everything a reader can ask a timeline, with ``call`` asked for each of ``keys``."""
    return (
        (line.seq, line.turn, line.step, line.next_turn, line.next_step),
        line.open_calls,
        line.unanswered,
        line.dangling,
        line.findings,
        line.calls(),
        [line.call(*key) for key in keys],
        repr(line),
    )


def keys_of(events: Iterable[Event]) -> list[tuple[int, int, str]]:
    """Every call key any event of the log names (proposed, started, finished or answered)."""
    found: dict[tuple[int, int, str], None] = {}
    for e in events:
        data = e.data
        if e.type == "assistant/message":
            for part in data.message.content:
                if isinstance(part, ToolCallPart):
                    found[(data.turn, data.step, part.id)] = None
        elif e.type in ("tool/call", "tool/outcome"):
            found[(data.turn, data.step, data.call_id)] = None
    return list(found)


def reopened_at(events: list[Event], trims: Iterable[int]) -> Timeline:
    """The timeline of a session closed and reopened from a snapshot at each seq of ``trims``
    (through the default snapshot codec, as ``store.open`` restores it), then caught up."""
    codec = {spec.key: spec for spec in SNAPSHOT_STATES}[TIMELINE.key]
    points = set(trims)
    state = TIMELINE.initial()
    for e in events:
        state = TIMELINE.apply(state, e)
        if e.seq in points:
            state = codec.decode(codec.encode(state))
    return Timeline(state)


def cached_seq(session: Session) -> int:
    """The seq the session's cached timeline state stands at (its ``catch_up`` cursor)."""
    entry = session.projection_cache[TIMELINE.key]
    state: TimelineState = entry.state
    return state.seq


class Recorder:
    """Plays a run into a live trimming session, reading the timeline as an agent does, and
    notes each trim: the seq the cached timeline was trimmed at, and the views held before."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.loaded_from = session.loaded_from
        self.trims: list[int] = []
        self.held: list[tuple[Timeline, tuple[Any, ...]]] = []

    def flushed(self) -> None:
        session = self.session
        if session.loaded_from != self.loaded_from:
            self.loaded_from = session.loaded_from
            self.trims.append(cached_seq(session))

    async def play(self, run: AgentRun, read_every: int) -> None:
        for position, planned in enumerate(run.events):
            self.session.append(
                planned.type, planned.data, surface=planned.surface, sources=planned.sources
            )
            if position % read_every == 0:
                line = timeline(self.session)
                self.held.append((line, answers(line, [])))
            if planned.checkpoint:
                await self.session.flush()
                self.flushed()
        await self.session.flush()
        self.flushed()


@given(
    run=agent_runs(max_turns=12, max_steps=3, max_calls=3),
    snapshot_every=st.integers(3, 12),
    read_every=st.integers(1, 9),
)
async def test_a_trimmed_timeline_answers_what_a_reopened_one_answers(
    run: AgentRun, snapshot_every: int, read_every: int
) -> None:
    note(repr(run))
    data = MemoryData()
    async with open_store("memory:", data=data, snapshot_every=snapshot_every, trim_every=1) as s:
        session = await s.create(session_id="s")
        # The agent's reads: the timeline every few events, and whatever the snapshots catch up.
        recorder = Recorder(session)
        await recorder.play(run, read_every)
        live = timeline(session)
        events = await full_log(s, "s")
        keys = keys_of(events)
        note(f"trimmed at {recorder.trims}")
        event(f"trims: {min(len(recorder.trims), 3)}")
        # What it answers, for every accessor and every call the log names, is what a session
        # closed and reopened from a snapshot at each of its trims answers, caught up to the
        # same head ...
        assert answers(live, keys) == answers(reopened_at(events, recorder.trims), keys)
        # ... which knows no more calls than the full replay and, once trimmed, fewer.
        full = reopened_at(events, ())
        assert set(live.calls()) <= set(full.calls())
        if len(live.calls()) < len(full.calls()):
            event("answered calls of closed steps forgotten")
        # What a snapshot carries survives every trim: numbering, open turn and step, and
        # every call that can still change.
        assert (live.turn, live.step, live.next_turn, live.next_step) == (
            full.turn,
            full.step,
            full.next_turn,
            full.next_step,
        )
        assert (live.open_calls, live.unanswered, live.dangling) == (
            full.open_calls,
            full.unanswered,
            full.dangling,
        )
        # Every timeline read before a trim still answers what it answered then.
        for line, then in recorder.held:
            assert answers(line, []) == then
        trims = recorder.trims
    # Reopened from the store's latest snapshot (written by this session, which had trimmed at
    # the points before it), the timeline is the same as the model of it above.
    async with open_store("memory:", data=data.restarted()) as again:
        reopened = await again.open("s")
        if reopened.snapshot_seq is not None:
            at = reopened.snapshot_seq
            points = [seq for seq in trims if seq < at] + [at]
            assert answers(timeline(reopened), keys) == answers(reopened_at(events, points), keys)
            if trims and trims[-1] == at:
                event("last trim at the stored snapshot")
                assert answers(timeline(reopened), keys) == answers(live, keys)
        await reopened.aclose()


async def test_a_long_live_session_forgets_the_answered_calls_of_closed_steps(
    stores: Opener,
) -> None:
    async with stores(**TRIMMING) as store:
        session = await store.create(session_id="s")
        # Ten turns of three calls each, compacting every third turn, all in one session.
        await live_run(session, 10)
        early = timeline(session)
        assert session.loaded_from > 0
        # The turns are closed and their calls answered: the trims forgot them (a full replay
        # would know all thirty) ...
        assert len(early.calls()) < 30
        assert early.call(1, 1, "c1-1-0") is None
        # ... while the numbering and what is open went on as before.
        assert (early.turn, early.step, early.next_turn, early.next_step) == (None, None, 11, 1)
        assert early.unanswered == () and early.findings == ()
        # Fifty turns more. Each ends with a flush that snapshots and trims, after which the
        # timeline knows no call at all, or (when that snapshot was skipped because the
        # previous one was still being written, so the timeline was trimmed where it stood)
        # only the calls of the turns since: never more than a few, however long the log
        # grows, where a full replay's knows 3 more each turn.
        counts = []
        for turn in range(11, 61):
            await live_run(session, 1, first=turn)
            counts.append(len(timeline(session).calls()))
        assert session.head > 800
        assert max(counts) < 30 and 0 in counts
        # A call answered since the latest trim is still known, with every state it reached.
        session.append("turn/start", TurnStart(turn=61))
        begin_step(session, 61, 1, ["late"])
        answer(session, 61, 1, "late")
        session.append("step/end", StepEnd(turn=61, step=1))
        late = timeline(session).call(61, 1, "late")
        assert late is not None and late.status == "resulted" and late.proposed is not None
        # The timeline held from turn 10 still answers what it did.
        assert early.next_turn == 11 and early.call(1, 1, "c1-1-0") is None
        await session.aclose()


def begin_step(session: Session, turn: int, step: int, calls: list[str]) -> None:
    """Open step ``turn.step`` and propose ``calls`` in one assistant message."""
    session.append("step/start", StepStart(turn=turn, step=step))
    parts = tuple(ToolCallPart(id=call_id, name="read", arguments="{}") for call_id in calls)
    message = Message.assistant(f"step {step}", tool_calls=parts)
    reply = AssistantMessage(turn=turn, step=step, message=message, finish="tool-calls")
    session.append("assistant/message", reply, surface=APPEND)


def answer(session: Session, turn: int, step: int, call_id: str) -> None:
    result = Message.tool_result(call_id, f"contents for {call_id}")
    session.append("tool/result", ToolResult(turn=turn, step=step, message=result), surface=APPEND)


def compact(session: Session) -> None:
    """Replace the whole surface by a summary: a snapshot (and a trim) at the next flush."""
    nodes = list(session.surface_index.nodes)
    summary = UserMessage(message=Message.user("summary so far"))
    session.append("user/message", summary, surface=Replace(nodes[0], nodes[-1]), sources=nodes)


async def test_a_trim_in_the_middle_of_a_step_keeps_its_calls_and_recovery_sees_them(
    stores: Opener,
) -> None:
    async with stores(snapshot_every=1, trim_every=1) as store:
        session = await store.create(session_id="s")
        # Step 1 runs two calls, both answered.
        session.append("turn/start", TurnStart(turn=1))
        session.append("user/message", UserMessage(message=Message.user("go")), surface=APPEND)
        begin_step(session, 1, 1, ["a", "b"])
        answer(session, 1, 1, "a")
        answer(session, 1, 1, "b")
        session.append("step/end", StepEnd(turn=1, step=1))
        # Step 2 proposes three calls: one is answered, one started, one not started yet ...
        begin_step(session, 1, 2, ["x", "y", "z"])
        for call_id in ("x", "y"):
            started = ToolCall(turn=1, step=2, call_id=call_id, name="read", arguments="{}")
            session.append("tool/call", started)
        answer(session, 1, 2, "x")
        held = timeline(session)
        assert session.loaded_from == 0
        # ... when the step-1 exchange is compacted and the flush snapshots and trims.
        nodes = list(session.surface_index.nodes)
        summary = UserMessage(message=Message.user("summary of step 1"))
        session.append(
            "user/message", summary, surface=Replace(nodes[0], nodes[3]), sources=nodes[:4]
        )
        await session.flush()
        assert session.loaded_from == session.head
        line = timeline(session)
        # Forgotten: step 1's answered calls. Kept: the open step's three calls, in the
        # model's order, with every state they reached.
        assert line.call(1, 1, "a") is None and line.call(1, 1, "b") is None
        assert [(c.call_id, c.status) for c in line.open_calls] == [
            ("x", "resulted"),
            ("y", "started"),
            ("z", "proposed"),
        ]
        assert [c.call_id for c in line.dangling] == ["y", "z"]
        assert [c.call_id for c in line.calls()] == ["x", "y", "z"]
        assert (line.turn, line.step) == (held.turn, held.step)
        assert (line.next_turn, line.next_step) == (2, 3)
        # The timeline read before the trim still knows step 1's calls.
        assert held.call(1, 1, "a") is not None and len(held.calls()) == 5
        # Recovery on the trimmed live session classifies the dangling calls from it ...
        diagnosis = scan(session)
        assert [(c.call.call_id, c.kind) for c in diagnosis.dangling] == [
            ("y", "started"),
            ("z", "proposed"),
        ]
        # ... and repair closes them: a result for each (unknown outcome for the started one,
        # not started for the other), then the step and the turn.
        report = await repair(session)
        # (Its flush snapshots and trims again: the closers are read back from the store.)
        closers = [e async for e in session.read_events(report.appended[0])]
        assert [e.seq for e in closers] == list(report.appended)
        assert [e.type for e in closers] == ["tool/result"] * 2 + ["step/end", "turn/end"]
        assert [e.data.error.name for e in closers[:2]] == [
            "ToolOutcomeUnknownError",
            "ToolNotStartedError",
        ]
        repaired = timeline(session)
        assert repaired.turn is None and repaired.unanswered == ()
        await session.aclose()
    # Reopened from its latest snapshot, the session is as closed and its timeline numbers on
    # as the live one's (which calls each knows depends on where that snapshot fell).
    async with stores() as store:
        reopened = await store.open("s")
        assert reopened.snapshot_seq is not None
        assert answers(timeline(reopened), [])[:5] == answers(repaired, [])[:5]
        assert scan(reopened) == scan(session)
        await reopened.aclose()


async def test_the_inbox_and_request_header_are_carried_whole_and_kept_whole() -> None:
    async with open_store("memory:", **TRIMMING) as store:
        session = await store.create(session_id="s")
        # Every turn queues an input under a request id of its own; the session trims often.
        for turn in range(1, 31):
            queued = Message.user(f"later {turn}", id=f"q{turn}")
            session.append(
                "agent/inbox/spliced",
                enqueue(inbox(session), "next-turn", queued, request_id=f"r{turn}"),
            )
            await live_run(session, 1, first=turn)
        assert session.loaded_from > 0
        # Their snapshot forms carry all of them, so a trim leaves them as they are: every
        # request id ever submitted stays known (a duplicate is refused however old) ...
        events = await full_log(store, "s")
        replayed = fold(INBOX, events).view()
        assert inbox(session) == replayed
        assert [inbox(session).request_seq(f"r{turn}") for turn in (1, 30)] == [
            replayed.request_seq("r1"),
            replayed.request_seq("r30"),
        ]
        assert inbox(session).request_seq("r1") is not None
        # ... and the settings in force are the last ones set.
        assert request_header(session) == fold(REQUEST_HEADER, events)
        assert request_header(session).model == "model-26"
        await session.aclose()


class Types:
    """An app's own projection, registered for snapshots: the types seen, and a count."""

    key = "tests.types"

    def initial(self) -> dict[str, int]:
        return {}

    def apply(self, state: dict[str, int], event: Event) -> dict[str, int]:
        state[event.type] = state.get(event.type, 0) + 1
        return state


def broken_trim(state: dict[str, int]) -> dict[str, int]:
    raise RuntimeError("this trim is broken")


async def test_an_apps_state_is_trimmed_by_its_codec_and_a_failing_trim_is_contained(
    caplog: pytest.LogCaptureFixture,
) -> None:
    types = Types()

    def codecs(trim: Any) -> tuple[SnapshotState, ...]:
        """The projections' codecs and one for the app's own state, passed to the store."""
        spec = SnapshotState(
            key=types.key,
            version=1,
            encode=msgspec.json.encode,
            decode=lambda data: msgspec.json.decode(data, type=dict[str, int]),
            initial=types.initial,
            apply=types.apply,
            trim=trim,
        )
        return (*SNAPSHOT_STATES, spec)

    # A trim that keeps only the turn count: the session applies it at each trim, so the
    # state it caches is what the trim made of it, not the whole count.
    keep_turns = codecs(lambda state: {"turn/start": state.get("turn/start", 0)})
    async with open_store("memory:", snapshot_states=keep_turns, **TRIMMING) as store:
        session = await store.create(session_id="s")
        catch_up(session, types)
        await live_run(session, 9)
        assert session.loaded_from > 0
        counts = catch_up(session, types)
        assert counts["turn/start"] == 9
        assert sum(counts.values()) < session.head + 1  # a full fold counts every event
        await session.aclose()
    # A trim that raises is logged; the state stays as it was (right, only larger), and the
    # session goes on trimming its events.
    async with open_store("memory:", snapshot_states=codecs(broken_trim), **TRIMMING) as store:
        session = await store.create(session_id="s")
        catch_up(session, types)
        with caplog.at_level(logging.ERROR, logger="eventlog"):
            await live_run(session, 9)
        assert session.loaded_from > 0
        assert "state 'tests.types' not trimmed" in caplog.text
        assert catch_up(session, types) == fold(types, await full_log(store, "s"))
        await session.aclose()
