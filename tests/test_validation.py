"""Commit-time validation: every value that reaches a column or a payload is checked at
``append`` (and ``create``) on every store, with a typed error naming the path, and a refused
call changes nothing."""

from __future__ import annotations

import math
import sys
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from eventlog import (
    APPEND,
    EventLogError,
    EventTypes,
    Message,
    Replace,
    RequestHeader,
    Session,
    StepEnd,
    StepStart,
    TextPart,
    ToolResult,
    ToolSpec,
    TurnEnd,
    TurnStart,
    UserMessage,
    ValidationError,
    open_store,
)
from eventlog.stores import LogLoader, Row
from tests.three_stores import Opener, snapshot, stores

pytestmark = pytest.mark.anyio
__all__ = ("stores",)  # the fixture, imported for its name

LIMIT = 2**63 - 1


def nested(depth: int, leaf: Any = "x") -> Any:
    """``depth`` levels of ``{"a": ...}`` around ``leaf``."""
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def refuse(session: Session, call: Callable[[], object], text: str) -> ValidationError:
    """``call`` raises a ValidationError containing ``text`` and changes nothing."""
    before = snapshot(session)
    with pytest.raises(ValidationError) as caught:
        call()
    assert text in str(caught.value)
    assert snapshot(session) == before
    return caught.value


# -- integers that reach a column ---------------------------------------------------------------


async def test_a_time_beyond_64_bits_is_refused_on_every_store(stores: Opener) -> None:
    async with stores() as store:
        session = await store.create(session_id="s")
        session.append("turn/start", TurnStart(turn=1), time=5)
        await session.flush()
        # One past the largest signed 64-bit integer: refused at commit, nothing queued.
        for bad in (2**63, 2**64, -1, 1.5, True, "5", None.__class__):
            refuse(
                session,
                lambda bad=bad: session.append(
                    "turn/end", TurnEnd(turn=1, reason="completed"), time=bad
                ),  # type: ignore[misc]
                "is not epoch milliseconds",
            )
        # The largest one is accepted, written and read back as it was.
        session.append("turn/end", TurnEnd(turn=1, reason="completed"), time=LIMIT)
        await session.flush()
        other = await store.create(session_id="t")
        other.append("turn/start", TurnStart(turn=1))
        await other.flush()  # the other session of the store is not blocked
    async with stores() as store:
        again = await store.open("s")
        assert [e.time for e in await again.events()] == [5, LIMIT]


async def test_payload_integers_beyond_64_bits_are_refused(session: Session) -> None:
    refuse(
        session,
        lambda: session.append("request/header", RequestHeader(params={"seed": 2**64})),
        "Expected `int` that fits 64 bits (signed), got 18446744073709551616 - at `$.params.seed`",
    )
    refuse(
        session,
        lambda: session.append("turn/start", TurnStart(turn=2**63)),
        "Expected `int` that fits 64 bits (signed), got 9223372036854775808 - at `$.turn`",
    )


# -- nesting ------------------------------------------------------------------------------------


async def test_nesting_is_limited_and_the_refusal_names_the_path(session: Session) -> None:
    # 64 levels in all (the payload, its params dict, then 62 dicts in it) are accepted ...
    session.append("request/header", RequestHeader(params=nested(63)))
    # ... one more is refused, naming where, and far deeper is refused the same way (no
    # RecursionError, however deep).
    deep_path = "$.params" + ".a" * 63
    refuse(
        session,
        lambda: session.append("request/header", RequestHeader(params=nested(64))),
        f"Expected at most 64 levels of nesting, got `dict` nested deeper - at `{deep_path}`",
    )
    refuse(
        session,
        lambda: session.append("request/header", {"params": nested(100_000)}),
        "Expected at most 64 levels of nesting",
    )


async def test_the_nesting_limit_is_an_option_and_applies_to_metadata() -> None:
    async with open_store("memory:", max_nesting=4) as store:
        session = await store.create(metadata=nested(4))
        with pytest.raises(
            ValidationError, match="metadata is not valid: Expected at most 4 levels of nesting"
        ):
            await store.create(metadata=nested(5))
        session.append("request/header", RequestHeader(params=nested(3)))
        with pytest.raises(
            ValidationError,
            match=r"Expected at most 4 levels of nesting, got"
            r" `dict` nested deeper - at `\$.params.a.a.a`",
        ):
            session.append("request/header", RequestHeader(params=nested(4)))
    with pytest.raises(ValidationError, match="option max_nesting must be an int from 1 to 256"):
        open_store("memory:", max_nesting=0)


def _deep_call(depth: int, fn: Callable[[], Any]) -> Any:
    return fn() if depth <= 0 else _deep_call(depth - 1, fn)


def test_a_deep_but_allowed_log_opens_from_a_deep_call_stack(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'deep.db'}"

    async def write() -> list[Row]:
        async with open_store(url) as store:
            session = await store.create(session_id="deep")
            session.append("request/header", RequestHeader(params=nested(63)))
            await session.flush()
            return [
                row async for chunk in store.backend.read_rows("deep", 0, None) for row in chunk
            ]

    async def reopen() -> int:
        async with open_store(url) as store:
            return (await store.open("deep")).head

    rows = anyio.run(write)
    # A stack so deep that msgspec cannot decode 64 levels on it any more ...
    room = sys.getrecursionlimit() - len(_frames()) - 40
    with pytest.raises(RecursionError):
        _deep_call(room, lambda: msgspec.json.decode(rows[0].data))
    # ... and the loader still loads the row from there (a fresh stack for the decode).
    loader = LogLoader(EventTypes(), "deep")
    _deep_call(room, lambda: loader.feed(rows))
    assert loader.events[0].data == RequestHeader(params=nested(63))
    # The whole open, from a deep stack too.
    assert _deep_call(room - 300, lambda: anyio.run(reopen)) == 0


def _frames() -> list[Any]:
    frame, frames = sys._getframe(), []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back  # type: ignore[assignment]
    return frames


# -- strings ------------------------------------------------------------------------------------


LONE = "\ud800"


async def test_lone_surrogates_are_refused_everywhere() -> None:
    async with open_store("memory:") as store:
        session = await store.create(session_id="s")
        refuse(
            session,
            lambda: session.append(
                "user/message", UserMessage(message=Message.user(f"a{LONE}b")), surface=APPEND
            ),
            "Expected `str` without lone surrogates (they have no UTF-8 form), got"
            " 'a\\ud800b' (a lone surrogate) - at `$.message.content[0].text`",
        )
        refuse(
            session,
            lambda: session.append(
                "user/message", UserMessage(message=Message.user("x", id=LONE)), surface=APPEND
            ),
            "`$.message.id`",
        )
        refuse(
            session,
            lambda: session.append("request/header", {"params": {LONE: 1}}),
            "Expected keys of `str` without lone surrogates (they have no UTF-8 form), got"
            " the key '\\ud800' (a lone surrogate) - at `$.params`",
        )
        refuse(session, lambda: session.append(f"app/{LONE}", {}), "is not registered")
        for bad_id in (LONE, f"a{LONE}"):
            with pytest.raises(ValidationError, match="is not valid"):
                await store.create(session_id=bad_id)
            with pytest.raises(ValidationError, match="is not valid"):
                await store.open(bad_id)
        with pytest.raises(
            ValidationError, match=r"got '\\ud800' \(a lone surrogate\) - at `\$.who`"
        ):
            await store.create(metadata={"who": LONE})
        with pytest.raises(ValidationError, match="list after must be"):
            await store.list(after=LONE)
    with pytest.raises(ValidationError, match="lone surrogate"):
        open_store(f"sqlite:///x{LONE}.db")


async def test_ids_with_a_trailing_newline_or_control_characters_are_refused() -> None:
    async with open_store("memory:") as store:
        await store.create(session_id="abc")
        for bad in ("abc\n", "abc\r", "ab\tc", "abc\x00", "\nabc"):
            with pytest.raises(ValidationError, match="is not valid"):
                await store.create(session_id=bad)
        assert [i.id for i in await store.list()] == ["abc"]
    with pytest.raises(ValidationError, match="not namespaced"):
        EventTypes().register("app/note\n", TurnStart)


# -- strict payloads: a Struct and a dict are held to the same rules ----------------------------


WRONG_LEAVES = [
    pytest.param(b"bytes", id="bytes"),
    pytest.param(bytearray(b"x"), id="bytearray"),
    pytest.param(uuid.UUID(int=1), id="uuid"),
    pytest.param(datetime(2026, 1, 1, tzinfo=UTC), id="datetime"),
    pytest.param(Decimal("1.5"), id="decimal"),
    pytest.param({1, 2}, id="set"),
    pytest.param(frozenset(), id="frozenset"),
    pytest.param(object(), id="object"),
]


@pytest.mark.parametrize("leaf", WRONG_LEAVES)
async def test_a_wrong_type_inside_a_struct_is_refused_as_in_a_dict(
    session: Session, leaf: Any
) -> None:
    # Where a str is declared: the Struct (unchecked by its constructor) and the dict alike.
    as_struct = UserMessage(message=Message(id=leaf, role="user", content=()))
    refuse(
        session,
        lambda: session.append("user/message", as_struct, surface=APPEND),
        "at `$.message.id`",
    )
    as_dict = {"message": {"id": leaf, "role": "user", "content": []}}
    refuse(
        session,
        lambda: session.append("user/message", as_dict, surface=APPEND),
        "at `$.message.id`",
    )
    # Inside a free-form JSON field (Any): it would be written as something else.
    refuse(
        session,
        lambda: session.append("request/header", RequestHeader(params={"k": [leaf]})),
        "at `$.params.k[0]`",
    )
    refuse(
        session,
        lambda: session.append("request/header", ToolSpec(name="t", parameters={"k": leaf})),
        "Expected `RequestHeader`, got `ToolSpec` - at `$`",
    )


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(TurnStart(turn="1"), id="str-for-int"),  # type: ignore[arg-type]
        pytest.param(TurnStart(turn=1.0), id="float-for-int"),  # type: ignore[arg-type]
        pytest.param(TurnStart(turn=True), id="bool-for-int"),
        pytest.param(TurnStart(turn=None), id="none-for-int"),  # type: ignore[arg-type]
    ],
)
async def test_wrong_scalars_in_a_struct_are_refused(session: Session, data: Any) -> None:
    refuse(session, lambda: session.append("turn/start", data), "at `$.turn`")
    refuse(session, lambda: session.append("turn/start", msgspec.to_builtins(data)), "at `$.turn`")


async def test_a_message_part_of_the_wrong_struct_is_refused(session: Session) -> None:
    wrong = Message(id="m", role="user", content=(ToolSpec(name="x"),))  # type: ignore[arg-type]
    refuse(
        session,
        lambda: session.append("user/message", UserMessage(message=wrong), surface=APPEND),
        "`$.message.content[0]`",
    )


async def test_non_finite_numbers_are_refused_in_payloads_and_metadata(session: Session) -> None:
    for bad in (math.nan, math.inf, -math.inf):
        refuse(
            session,
            lambda bad=bad: session.append("request/header", RequestHeader(params={"t": bad})),  # type: ignore[misc]
            "Expected a finite `float` (JSON has no NaN or infinity), got"
            f" {bad!r} - at `$.params.t`",
        )
    async with open_store("memory:") as store:
        for bad in (math.nan, math.inf):
            with pytest.raises(
                ValidationError,
                match=r"Expected a finite `float` .*, got (nan|inf) - at `\$.x\[1\]`",
            ):
                await store.create(metadata={"x": [1.0, bad]})
        with pytest.raises(
            ValidationError, match="Expected `str` keys, got a key of type `int` \\(1\\) - at `\\$`"
        ):
            await store.create(metadata={1: "one"})  # type: ignore[dict-item]
        with pytest.raises(ValidationError, match="metadata must be a dict"):
            await store.create(metadata=[("a", 1)])  # type: ignore[arg-type]
        assert await store.list() == []


async def test_an_app_type_with_a_bytes_field_keeps_its_bytes_strictly() -> None:
    class Blob(msgspec.Struct, frozen=True, kw_only=True):
        name: str
        body: bytes

    types = EventTypes()
    types.register("app/blob", Blob)
    async with open_store("memory:", types=types) as store:
        session = await store.create(session_id="s")
        # The declared bytes field takes bytes, from a Struct and from a dict ...
        assert session.append("app/blob", Blob(name="a", body=b"\x00\xff")).data.body == b"\x00\xff"
        assert session.append("app/blob", {"name": "b", "body": b"z"}).data.body == b"z"
        # ... but not a str (which would be read as base64), nor bytes where str is declared.
        refuse(
            session,
            lambda: session.append("app/blob", Blob(name="c", body="aGk=")),  # type: ignore[arg-type]
            "Expected `bytes`, got `str` ('aGk=') - at `$.body`",
        )
        refuse(
            session,
            lambda: session.append("app/blob", {"name": "c", "body": "aGk="}),
            "Expected `bytes`, got `str` ('aGk=') - at `$.body`",
        )
        refuse(session, lambda: session.append("app/blob", Blob(name=b"c", body=b"")), "str")  # type: ignore[arg-type]


async def test_a_schema_with_bytes_is_held_to_the_walk_s_rules_on_the_fast_path() -> None:
    """A schema of JSON types and bytes (as messages are, for their media) is validated by a
    JSON round trip; what only the walk refuses still is: a dict key that is not a str where
    the schema declares int keys, nesting past the limit, a 64-bit overflow, NaN."""

    class Doc(msgspec.Struct, frozen=True, kw_only=True):
        body: bytes = b""
        by_number: dict[int, str] = {}
        free: Any = None
        ratio: float = 0.0

    types = EventTypes()
    types.register("app/doc", Doc)
    async with open_store("memory:", types=types, max_nesting=8) as store:
        session = await store.create(session_id="s")
        # Valid: bytes, and brackets inside strings (more than the limit) are only text.
        text = "[{" * 40
        stored = session.append("app/doc", Doc(body=b"\x00", free={"t": text}))
        assert stored.data == Doc(body=b"\x00", free={"t": text})
        refuse(
            session,
            lambda: session.append("app/doc", Doc(by_number={1: "one"})),
            "Expected `str` keys, got a key of type `int` (1) - at `$.by_number`",
        )
        refuse(
            session,
            lambda: session.append("app/doc", Doc(free=nested(8))),
            "Expected at most 8 levels of nesting",
        )
        refuse(
            session,
            lambda: session.append("app/doc", Doc(free=2**64)),
            "Expected `int` that fits 64 bits (signed)",
        )
        refuse(
            session,
            lambda: session.append("app/doc", Doc(ratio=math.nan)),
            "Expected a finite `float`",
        )
        refuse(
            session,
            lambda: session.append("app/doc", Doc(free=b"x")),
            "Expected a JSON value (str, int, float, bool, None, list, dict or a Struct of them),"
            " got `bytes` (it reads back as `str`) - at `$.free`",
        )
        assert session.head == 0


# -- wrong argument types ------------------------------------------------------------------------


async def test_wrong_argument_types_to_append_are_typed_errors(session: Session) -> None:
    session.append("turn/start", TurnStart(turn=1))
    step = StepStart(turn=1, step=1)
    cases: list[tuple[Callable[[], object], str]] = [
        (lambda: session.append(123, step), "event type 123 is not registered"),  # type: ignore[arg-type]
        (lambda: session.append(["step/start"], step), "is not registered"),  # type: ignore[arg-type]
        (lambda: session.append(None, step), "is not registered"),  # type: ignore[arg-type]
        (
            lambda: session.append("step/start", [1, 2]),
            "Expected `StepStart` or a dict of its fields, got `list` - at `$`",
        ),
        (
            lambda: session.append("step/start", None),
            "Expected `StepStart` or a dict of its fields, got `NoneType` - at `$`",
        ),
        (lambda: session.append("step/start", step, sources=5), "sources must be a sequence"),  # type: ignore[arg-type]
        (lambda: session.append("step/start", step, sources="0"), "source '0' is not the seq"),  # type: ignore[arg-type]
        (lambda: session.append("step/start", step, sources=(True,)), "source True is not"),
        (lambda: session.append("step/start", step, sources=(2**70,)), "is not the seq"),
        (lambda: session.append("step/start", step, surface="append"), "surface must be"),  # type: ignore[arg-type]
        (
            lambda: session.append(
                "user/message",
                UserMessage(message=Message.user("b")),
                surface=Replace(False, False),
                sources=(0,),
            ),
            "Replace start and end must be ints (seqs), got Replace(start=False, end=False)",
        ),
    ]
    for call, text in cases:
        refuse(session, call, text)


async def test_wrong_argument_types_to_the_store_are_typed_errors(stores: Opener) -> None:
    async with stores() as store:
        session = await store.create(session_id="s")
        session.append("turn/start", TurnStart(turn=1))
        session.append("turn/end", TurnEnd(turn=1, reason="completed"))
        await session.flush()
        calls: list[tuple[Callable[[], Any], str]] = [
            (lambda: store.create(session_id=5), "session id 5 is not valid"),  # type: ignore[arg-type]
            (lambda: store.create(metadata="x"), "metadata must be a dict"),  # type: ignore[arg-type]
            (lambda: store.open(5), "session id 5 is not valid"),  # type: ignore[arg-type]
            (lambda: store.open("s", salvage="yes"), "salvage must be True or False"),  # type: ignore[arg-type]
            (lambda: store.fork("s", "1"), "fork boundary must be an int"),  # type: ignore[arg-type]
            (lambda: store.fork("s", 2**70), "fork boundary must be an int"),
            (lambda: store.fork("s", None), "fork boundary must be an int"),  # type: ignore[arg-type]
            (lambda: store.fork("s", True), "fork boundary must be an int"),
            (lambda: store.list(limit="1"), "list limit must be at least 1"),  # type: ignore[arg-type]
            (lambda: store.list(limit=2**64), "list limit must be at least 1"),
            (lambda: store.list(limit=True), "list limit must be at least 1"),
            (lambda: store.list(after=5), "list after must be"),  # type: ignore[arg-type]
            (lambda: store.delete(5), "session id 5 is not valid"),  # type: ignore[arg-type]
            (lambda: _first(store.read("s", from_seq="0")), "read from_seq must be an int"),  # type: ignore[arg-type]
            (lambda: _first(store.read("s", from_seq=2**64)), "read from_seq must be an int"),
            (lambda: _first(store.read("s", limit=-1)), "read limit must be None or an int"),
            (lambda: _first(store.read("s", limit=2**64)), "read limit must be None or an int"),
            (lambda: _first(store.read(["s"])), "is not valid"),  # type: ignore[arg-type]
            (lambda: _first(store.follow("s", after="x")), "follow after must be an int"),  # type: ignore[arg-type]
            (lambda: _first(store.follow("s", after=-2)), "follow after must be an int"),
            (lambda: _first(store.follow("s", after=2**64)), "follow after must be an int"),
        ]
        for call, text in calls:
            with pytest.raises(ValidationError) as caught:
                await call()
            assert text in str(caught.value)
        # Nothing changed: the one session, as it was.
        assert [i.id for i in await store.list()] == ["s"]
        assert [e.seq async for e in store.read("s")] == [0, 1]


async def _first(events: Any) -> Any:
    async for event in events:
        return event
    return None


@pytest.mark.parametrize(
    ("options", "text"),
    [
        ({"write_delay": -1}, "option write_delay must be a number from 0.0 to 3600.0, got -1"),
        ({"write_delay": "x"}, "option write_delay must be a number"),
        ({"write_delay": math.nan}, "option write_delay must be a number"),
        ({"write_delay": math.inf}, "option write_delay must be a number"),
        ({"write_delay": True}, "option write_delay must be a number"),
        ({"max_pending_bytes": "x"}, "option max_pending_bytes must be an int from 1"),
        ({"max_pending_bytes": 0}, "option max_pending_bytes must be an int from 1"),
        ({"max_pending_bytes": 1.5}, "option max_pending_bytes must be an int from 1"),
        ({"max_event_bytes": -1}, "option max_event_bytes must be an int from 1"),
        ({"max_event_bytes": 2**64}, "option max_event_bytes must be an int from 1"),
        ({"max_nesting": 1000}, "option max_nesting must be an int from 1 to 256"),
        ({"types": "core"}, "option types must be an EventTypes registry"),
        ({"durability": ["power-loss"]}, "durability must be 'power-loss' or 'process-crash'"),
        ({"busy_timeout": math.inf}, "busy_timeout must be a positive number of seconds"),
        ({"poll_interval": "1"}, "poll_interval must be a positive number of seconds"),
        ({"inline_write_bytes": 2**64}, "inline_write_bytes must be a whole number of bytes"),
        ({"lease_ttl": -1}, "lease_ttl must be a positive number of seconds"),
        ({"pool_size": "x"}, "option pool_size must be an int from 1 to 1000"),
        ({"command_timeout": "x"}, "command_timeout must be a positive number of seconds"),
        ({"connect_timeout": 0}, "connect_timeout must be a positive number of seconds"),
        ({"schema": 5}, "option schema must be a string"),
    ],
)
def test_store_options_are_checked_at_open_store(options: dict[str, Any], text: str) -> None:
    for url in ("memory:", "sqlite:///never-created.db", "postgresql://postgres@127.0.0.1/x"):
        if url == "memory:" and set(options) & {
            "busy_timeout",
            "poll_interval",
            "inline_write_bytes",
            "lease_ttl",
            "pool_size",
            "command_timeout",
            "connect_timeout",
            "schema",
        }:
            continue  # backend options of the other stores: memory refuses them as unknown
        with pytest.raises(ValidationError) as caught:
            open_store(url, **options)
        assert text in str(caught.value), url
    assert not Path("never-created.db").exists()


def test_a_url_of_the_wrong_type_is_a_typed_error() -> None:
    for bad in (None, 5, b"memory:", ["memory:"]):
        with pytest.raises(ValidationError, match="store URL must be a string"):
            open_store(bad)  # type: ignore[arg-type]


async def test_every_refusal_is_an_eventlog_error(session: Session) -> None:
    # The class contract: nothing escapes as TypeError, OverflowError or RecursionError.
    attempts: list[Callable[[], object]] = [
        lambda: session.append("turn/start", {"turn": 2**200}),
        lambda: session.append("turn/start", TurnStart(turn=[1])),  # type: ignore[arg-type]
        lambda: session.append(
            "user/message",
            UserMessage(
                message=Message(id="m", role="user", content=(TextPart(text=b"x"),))  # type: ignore[arg-type]
            ),
            surface=APPEND,
        ),
        lambda: session.append(
            "tool/result",
            ToolResult(turn=1, step=1, message=Message.tool_result("c", LONE)),
            surface=APPEND,
        ),
        lambda: session.append("request/header", {"params": nested(5000)}),
    ]
    for attempt in attempts:
        before = snapshot(session)
        with pytest.raises(EventLogError):
            attempt()
        assert snapshot(session) == before


async def test_a_step_end_of_a_turn_with_no_step_is_refused(session: Session) -> None:
    session.append("turn/start", TurnStart(turn=1))
    refuse(
        session,
        lambda: session.append("step/end", StepEnd(turn=1, step=1)),
        "step/end of turn 1, step 1, but turn 1 is open, no step",
    )
