"""A fuzz of the whole public API on memory, SQLite and PostgreSQL.

Hypothesis drives one store per example through appends of every core payload type (as
Structs and as dicts, with hostile field values), envelopes (surface operations, sources,
times), store options, ids and metadata, and store calls (create, open, list, read, follow,
fork). Every refused call must raise a subclass of ``EventLogError`` and leave head, durable,
events, the surface and ``messages()`` as they were; at the end, every accepted event must
read back identically after flush and reopen, and the stored rows must be exactly the events
accepted (a refused call stored nothing).
"""

from __future__ import annotations

import tempfile
import uuid
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from eventlog import (
    APPEND,
    AssistantAttempt,
    AssistantMessage,
    CompactionSummary,
    EventLogError,
    InboxItem,
    InboxSpliced,
    Message,
    MessageSource,
    ReasoningPart,
    Replace,
    RequestHeader,
    Session,
    SessionForked,
    StepEnd,
    StepStart,
    TextPart,
    ToolCall,
    ToolCallPart,
    ToolError,
    ToolOutcome,
    ToolResult,
    ToolResultPart,
    ToolSpec,
    TurnEnd,
    TurnStart,
    Usage,
    UserMessage,
    open_store,
)
from eventlog.stores import LogStore, MemoryData
from tests.pg_children.server import fresh_schema, store_url
from tests.three_stores import snapshot

# -- hostile values -----------------------------------------------------------------------------

EDGE_INTS = [0, 1, 2, -1, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 2**100]
ints = st.one_of(st.integers(-3, 40), st.sampled_from(EDGE_INTS), st.booleans())
floats = st.floats(allow_nan=True, allow_infinity=True)
texts = st.one_of(
    st.text(max_size=6),
    st.text(st.characters(min_codepoint=0xD7F0, max_codepoint=0xE010), max_size=3),
    st.sampled_from(["abc\n", "a\x00b", "é", "\U0001f600", "ok"]),
)
odd = st.sampled_from(
    [
        b"raw",
        uuid.UUID(int=7),
        datetime(2026, 1, 1, tzinfo=timezone.utc),  # noqa: UP017
        Decimal("2.5"),
        frozenset({1}),
        (1, 2),
    ]
)
scalars = st.one_of(st.none(), st.booleans(), ints, floats, texts)
json_like = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)


def nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


free_form = st.one_of(
    st.dictionaries(texts, json_like, max_size=3),
    st.dictionaries(st.sampled_from(["k", "deep"]), st.integers(1, 80).map(nested), max_size=1),
    st.dictionaries(st.just("odd"), odd, max_size=1),
)


def maybe_hostile(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly ``valid``, sometimes a value of another type altogether."""
    return st.one_of(valid, valid, valid, scalars, odd)


clean_texts = st.text(max_size=6)  # no surrogates: hypothesis leaves them out by default
clean_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | clean_texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(clean_texts, inner, max_size=3),
    max_leaves=8,
)

# -- payloads of every core type ----------------------------------------------------------------

roles = st.sampled_from(["user", "assistant", "tool"])
parts = st.one_of(
    st.builds(TextPart, text=maybe_hostile(texts)),
    st.builds(ReasoningPart, text=texts, signature=st.none() | texts),
    st.builds(ToolCallPart, id=maybe_hostile(texts), name=texts, arguments=texts),
    st.builds(ToolResultPart, call_id=texts, content=maybe_hostile(texts), is_error=st.booleans()),
)
sources_of = st.builds(
    MessageSource,
    kind=st.sampled_from(["user", "model", "tool", "recovery", "compaction"]),
    request_id=st.none() | texts,
)


def messages_with(role: st.SearchStrategy[Any]) -> st.SearchStrategy[Message]:
    return st.builds(
        Message,
        id=maybe_hostile(texts),
        role=role,
        content=st.lists(parts, max_size=3).map(tuple),
        source=st.none() | sources_of,
    )


usage = st.none() | st.builds(Usage, input_tokens=ints, output_tokens=ints)


def next_kinds(session: Session) -> list[str]:
    """The core types a well-formed log may take next."""
    grammar = session.grammar
    anywhere = ["user/message", "request/header", "agent/inbox/spliced", "compaction/summary"]
    if grammar.turn is None:
        return ["turn/start", *anywhere]
    if grammar.step is None:
        return ["step/start", "turn/end", *anywhere]
    return [
        "step/end",
        "assistant/message",
        "assistant/message",
        "assistant/attempt",
        "tool/call",
        "tool/outcome",
        *anywhere,
    ]


@st.composite
def payloads(draw: st.DrawFn, session: Session, hostile: bool) -> tuple[str, Any]:
    """A (type, payload): well-formed unless ``hostile``, then anything near it."""
    grammar = session.grammar
    turn = grammar.turn or grammar.last_turn + 1
    step = grammar.step or grammar.last_step + 1
    if not hostile:
        return draw(clean_payloads(session, turn, step))
    turn = draw(st.sampled_from([turn, grammar.last_turn + 1]))
    turn = draw(st.one_of(st.just(turn), maybe_hostile(ints)))
    step = draw(st.one_of(st.just(step), ints))
    role_for = {"user/message": "user", "assistant/message": "assistant", "tool/result": "tool"}
    kind = draw(
        st.sampled_from(
            [
                "turn/start",
                "turn/end",
                "step/start",
                "step/end",
                "user/message",
                "assistant/message",
                "assistant/attempt",
                "tool/call",
                "tool/outcome",
                "tool/result",
                "request/header",
                "agent/inbox/spliced",
                "compaction/summary",
                "session/forked",
                "app/unknown",
            ]
        )
    )
    role = st.one_of(st.just(role_for.get(kind, "tool")), roles)
    message = messages_with(role)
    build: dict[str, st.SearchStrategy[Any]] = {
        "turn/start": st.builds(TurnStart, turn=st.just(turn)),
        "turn/end": st.builds(
            TurnEnd, turn=st.just(turn), reason=st.sampled_from(["completed", "aborted", "nope"])
        ),
        "step/start": st.builds(StepStart, turn=st.just(turn), step=st.just(step)),
        "step/end": st.builds(StepEnd, turn=st.just(turn), step=st.just(step)),
        "user/message": st.builds(UserMessage, message=message),
        "assistant/message": st.builds(
            AssistantMessage,
            turn=st.just(turn),
            step=st.just(step),
            message=message,
            usage=usage,
            finish=st.sampled_from(["stop", "tool-calls", "bogus"]),
        ),
        "assistant/attempt": st.builds(
            AssistantAttempt, turn=st.just(turn), step=st.just(step), error=st.none() | texts
        ),
        "tool/call": st.builds(
            ToolCall,
            turn=st.just(turn),
            step=st.just(step),
            call_id=texts,
            name=texts,
            arguments=maybe_hostile(texts),
        ),
        "tool/outcome": st.builds(
            ToolOutcome,
            turn=st.just(turn),
            step=st.just(step),
            call_id=texts,
            result=message,
            error=st.none() | st.builds(ToolError, name=texts, code=texts),
        ),
        "tool/result": st.builds(
            ToolResult,
            turn=st.just(turn),
            step=st.just(step),
            message=message,
            context=st.none() | messages_with(roles),
        ),
        "request/header": st.builds(
            RequestHeader,
            system=st.none() | maybe_hostile(texts),
            tools=st.none()
            | st.lists(st.builds(ToolSpec, name=texts, parameters=free_form), max_size=2).map(
                tuple
            ),
            params=st.none() | free_form,
        ),
        "agent/inbox/spliced": st.builds(
            InboxSpliced,
            target=st.sampled_from(["next-turn", "next-step"]),
            start=ints,
            removed=ints,
            inserted=st.lists(
                st.builds(InboxItem, id=texts, message=messages_with(st.just("user"))), max_size=2
            ).map(tuple),
        ),
        "compaction/summary": st.builds(CompactionSummary, text=maybe_hostile(texts), usage=usage),
        "session/forked": st.builds(SessionForked, parent=texts, boundary=ints),
        "app/unknown": st.just(TurnStart(turn=1)),
    }
    payload = draw(build[kind])
    form = draw(st.sampled_from(["struct", "struct", "dict", "junk"]))
    if form == "dict":
        payload = {name: getattr(payload, name) for name in payload.__struct_fields__}
    elif form == "junk":
        payload = draw(st.one_of(scalars, st.lists(scalars, max_size=2), odd))
    return kind, payload


@st.composite
def clean_payloads(draw: st.DrawFn, session: Session, turn: int, step: int) -> tuple[str, Any]:
    kind = draw(st.sampled_from(next_kinds(session)))
    text_part = st.builds(TextPart, text=clean_texts)

    def said(role: str) -> st.SearchStrategy[Message]:
        return st.builds(
            Message,
            id=clean_texts,
            role=st.just(role),
            content=st.lists(text_part, max_size=2).map(tuple),
        )

    build: dict[str, st.SearchStrategy[Any]] = {
        "turn/start": st.just(TurnStart(turn=turn)),
        "turn/end": st.just(TurnEnd(turn=turn, reason="completed")),
        "step/start": st.just(StepStart(turn=turn, step=step)),
        "step/end": st.just(StepEnd(turn=turn, step=step)),
        "user/message": st.builds(UserMessage, message=said("user")),
        "assistant/message": st.builds(
            AssistantMessage, turn=st.just(turn), step=st.just(step), message=said("assistant")
        ),
        "assistant/attempt": st.builds(AssistantAttempt, turn=st.just(turn), step=st.just(step)),
        "tool/call": st.builds(
            ToolCall,
            turn=st.just(turn),
            step=st.just(step),
            call_id=clean_texts,
            name=clean_texts,
            arguments=clean_texts,
        ),
        "tool/outcome": st.builds(
            ToolOutcome,
            turn=st.just(turn),
            step=st.just(step),
            call_id=clean_texts,
            result=said("tool"),
        ),
        "request/header": st.builds(
            RequestHeader,
            system=clean_texts,
            params=st.dictionaries(clean_texts, clean_json, max_size=3),
        ),
        "agent/inbox/spliced": st.builds(
            InboxSpliced,
            target=st.just("next-turn"),
            start=st.just(0),
            inserted=st.lists(
                st.builds(InboxItem, id=clean_texts, message=said("user")), max_size=1
            ).map(tuple),
        ),
        "compaction/summary": st.builds(CompactionSummary, text=clean_texts),
    }
    payload = draw(build[kind])
    if draw(st.booleans()):
        payload = {name: getattr(payload, name) for name in payload.__struct_fields__}
    return kind, payload


@st.composite
def envelopes(draw: st.DrawFn, session: Session, kind: str, hostile: bool) -> dict[str, Any]:
    """The keyword arguments of one append: surface, sources, time."""
    nodes = list(session.surface_index.nodes)
    surface_types = ("user/message", "assistant/message", "tool/result")
    usual = APPEND if kind in surface_types else None
    if not hostile:
        options: dict[str, Any] = {"surface": usual}
        if session.head >= 0 and draw(st.booleans()):
            options["sources"] = [draw(st.integers(0, session.head))]
        return options
    surface = draw(
        st.one_of(
            st.just(usual),
            st.just(usual),
            st.just(usual),
            st.sampled_from([None, APPEND, "append", 3]),
            st.builds(
                Replace,
                st.sampled_from([*nodes, False, True]) | ints,
                st.sampled_from([*nodes, False, True]),
            ),
        )
    )
    options = {"surface": surface}
    if draw(st.integers(0, 4)) == 0:
        options["sources"] = draw(
            st.one_of(st.lists(ints | st.sampled_from(nodes or [0]), max_size=3), scalars, texts)
        )
    if draw(st.integers(0, 3)) == 0:
        options["time"] = draw(st.one_of(ints, floats, texts))
    return options


# -- store calls --------------------------------------------------------------------------------

ids = st.one_of(st.sampled_from(["s", "other", "x-1"]), texts, ints, st.none())
metadata = st.one_of(st.none(), st.dictionaries(texts, json_like, max_size=3), scalars, free_form)


@st.composite
def store_calls(draw: st.DrawFn, session: Session) -> tuple[str, Any]:
    which = draw(st.sampled_from(["create", "open", "list", "read", "follow", "fork", "salvage"]))
    if which == "create":
        return which, (draw(ids), draw(metadata))
    if which == "list":
        return which, (draw(st.none() | texts | ints), draw(ints | texts))
    if which in ("read", "follow"):
        return which, (draw(ids | st.just(session.id)), draw(ints | texts), draw(st.none() | ints))
    if which == "fork":
        return which, (draw(ids | st.just(session.id)), draw(ints | texts | st.none()))
    return which, (draw(ids | st.just(session.id)),)


async def call_store(store: LogStore, which: str, args: tuple[Any, ...]) -> None:
    if which == "create":
        created = await store.create(session_id=args[0], metadata=args[1])
        await created.aclose()
    elif which == "open":
        opened = await store.open(args[0])
        await opened.aclose()
    elif which == "salvage":
        await store.open(args[0], salvage=True)
    elif which == "list":
        await store.list(after=args[0], limit=args[1])
    elif which == "read":
        async for _ in store.read(args[0], from_seq=args[1], limit=args[2]):
            pass
    elif which == "follow":
        with anyio.move_on_after(0.05):  # follow never ends on its own
            async for _ in store.follow(args[0], after=args[1]):
                pass
    else:
        forked = await store.fork(args[0], args[1])
        await forked.aclose()


# -- the property -------------------------------------------------------------------------------

valid_options = st.fixed_dictionaries(
    {},
    optional={
        "write_delay": st.sampled_from([0.0, 0.01, 30.0]),
        "max_pending_bytes": st.sampled_from([64 * 1024 * 1024, 1500]),
        "max_event_bytes": st.sampled_from([8 * 1024 * 1024, 400]),
        "max_nesting": st.sampled_from([64, 3]),
    },
)
bad_options: st.SearchStrategy[dict[str, Any]] = st.sampled_from(
    [
        {"write_delay": -1},
        {"write_delay": "x"},
        {"max_pending_bytes": 0},
        {"max_event_bytes": -1},
        {"max_nesting": 999},
        {"types": "core"},
    ]
)
store_options = st.one_of(valid_options, valid_options, valid_options, bad_options)


async def scenario(url: str, disk: MemoryData | None, data: st.DataObject) -> None:
    options: dict[str, Any] = data.draw(store_options, label="options")
    extra: dict[str, Any] = {} if disk is None else {"data": disk}
    if url.startswith("postgresql"):
        extra["lease_ttl"] = 5.0
    try:
        store = open_store(url, **options, **extra)
    except EventLogError:
        return  # a refused option: nothing started
    accepted = 0
    async with store:
        session = await store.create(session_id="s", metadata={"k": [1, "two"]})
        seen: list[int] = []
        session.subscribe(lambda event: seen.append(event.seq))
        for _ in range(data.draw(st.integers(5, 40), label="calls")):
            before = snapshot(session)
            if data.draw(st.integers(0, 5), label="store call?") == 0:
                which, args = data.draw(store_calls(session), label="store call")
                try:
                    await call_store(store, which, args)
                except EventLogError as exc:
                    event(f"{which} refused: {type(exc).__name__}")  # anything else fails
                else:
                    event(f"{which} accepted")
                # The background writer may have advanced durable meanwhile; nothing else moves.
                after = snapshot(session)
                assert after[:1] + after[2:] == before[:1] + before[2:]
                continue
            hostile = data.draw(st.integers(0, 2), label="hostile?") == 0
            kind, payload = data.draw(payloads(session, hostile), label="payload")
            hostile_envelope = hostile and data.draw(st.booleans(), label="hostile envelope?")
            envelope = data.draw(envelopes(session, kind, hostile_envelope), label="envelope")
            try:
                session.append(kind, payload, **envelope)
            except EventLogError as exc:
                note(f"refused: {exc}")
                event(f"append refused: {type(exc).__name__}")
                assert snapshot(session) == before, "a refused append changed the session"
                assert len(seen) == accepted
            else:
                event(f"append accepted: {kind}")
                accepted += 1
                assert session.head == before[0] + 1
            if data.draw(st.integers(0, 6), label="flush?") == 0:
                await session.flush()
        await session.flush()
        expected = [msgspec.to_builtins(e) for e in await session.events()]
        assert len(expected) == accepted == len(seen)
    # After reopen: exactly the accepted events, read back identically, by open and by read.
    reopen_extra: dict[str, Any] = {} if disk is None else {"data": disk.restarted()}
    if url.startswith("postgresql"):
        reopen_extra["lease_ttl"] = 5.0
    async with open_store(url, **reopen_extra) as again:
        reopened = await again.open("s")
        assert [msgspec.to_builtins(e) for e in await reopened.events()] == expected
        assert [msgspec.to_builtins(e) async for e in again.read("s")] == expected
        await reopened.aclose()


def _examples(share: int) -> int:
    profile = settings.default
    assert profile is not None
    return max(5, profile.max_examples // share)


def fuzz(share: int) -> settings:
    """The profile's settings, with a share of its examples (a store round trip each)."""
    return settings(
        max_examples=_examples(share),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


@fuzz(1)
@given(data=st.data())
def test_fuzz_the_api_on_memory(data: st.DataObject) -> None:
    anyio.run(scenario, "memory:", MemoryData(), data, backend="asyncio")


@fuzz(8)
@given(data=st.data())
def test_fuzz_the_api_on_sqlite(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'fuzz.db'}"
        anyio.run(scenario, url, None, data, backend="asyncio")


@pytest.mark.postgres
@fuzz(8)
@given(data=st.data())
def test_fuzz_the_api_on_postgresql(data: st.DataObject) -> None:
    with fresh_schema() as schema:
        anyio.run(scenario, store_url(schema), None, data, backend="asyncio")
