"""A list where a payload declares a tuple (or the reverse) is the same JSON: it is accepted,
normalised to the declared type, and stored as the same bytes; and every refusal of a payload
says, in msgspec's words, what was expected, what was given and where."""

from __future__ import annotations

import math
import uuid
from typing import Any

import msgspec
import pytest

from eventlog import (
    APPEND,
    AssistantMessage,
    EventTypes,
    ImagePart,
    Message,
    MessageSource,
    RequestHeader,
    ResultPart,
    Session,
    StepStart,
    TextPart,
    ToolCallPart,
    ToolResult,
    TurnStart,
    UserMessage,
    ValidationError,
    open_store,
)
from eventlog.stores import LogStore
from tests.three_stores import Opener, snapshot, stores

pytestmark = pytest.mark.anyio
__all__ = ("stores",)  # the fixture, imported for its name


class Doc(msgspec.Struct, frozen=True, kw_only=True):
    """An app payload with a declared tuple, a declared list, bytes and a free-form field."""

    pair: tuple[int, int] = (0, 0)
    names: list[str] = []
    body: bytes = b""
    free: Any = None


def _types() -> EventTypes:
    types = EventTypes()
    types.register("app/doc", Doc)
    return types


async def _stored_data(store: LogStore, session_id: str) -> list[bytes]:
    """The payload bytes of every stored event, read back from the store."""
    return [row.data async for chunk in store.read_rows(session_id) for row in chunk]


def _user(content: Any) -> UserMessage:
    source = MessageSource(kind="user")
    return UserMessage(message=Message(id="m", role="user", content=content, source=source))


async def test_a_list_where_a_tuple_is_declared_is_the_same_event(stores: Opener) -> None:
    async with stores(types=_types()) as store:
        session = await store.create(session_id="s")
        # The most natural spelling: a list of parts where Message declares a tuple ...
        as_list = session.append("user/message", _user([TextPart(text="hi")]), surface=APPEND)
        as_tuple = session.append("user/message", _user((TextPart(text="hi"),)), surface=APPEND)
        # ... and the dict form, which leaves the defaulted source out.
        as_dict = session.append(
            "user/message",
            {"message": {"id": "m", "role": "user", "content": [{"type": "text", "text": "hi"}]}},
            surface=APPEND,
        )
        # The events hold the declared tuple, equal whichever way they were given.
        assert as_list.data == as_tuple.data
        assert isinstance(as_list.data.message.content, tuple)
        assert as_dict.data.message.content == (TextPart(text="hi"),)
        # Tool calls and a tool result's parts given as lists, inside a step.
        session.append("turn/start", TurnStart(turn=1))
        session.append("step/start", StepStart(turn=1, step=1))
        call = ToolCallPart(id="c", name="f", arguments="{}")
        reply = Message.assistant(tool_calls=[call])
        session.append(
            "assistant/message", AssistantMessage(turn=1, step=1, message=reply), surface=APPEND
        )
        parts: list[ResultPart] = [
            TextPart(text="r"),
            ImagePart(media_type="image/png", data=b"\x89"),
        ]
        result = Message.tool_result("c", parts)
        answer = session.append(
            "tool/result", ToolResult(turn=1, step=1, message=result), surface=APPEND
        )
        assert answer.data.message.tool_results[0].content == tuple(parts)
        assert isinstance(parts, list)  # the caller's objects are not touched
        # An app's tuple given as a list, its list given as a tuple.
        doc = session.append("app/doc", Doc(pair=[1, 2], names=("a", "b"))).data  # type: ignore[arg-type]
        assert doc == Doc(pair=(1, 2), names=["a", "b"])
        await session.flush()
        # The stored bytes are the same for the list and the tuple spelling.
        data = await _stored_data(store, "s")
        assert data[0] == data[1]
    # Reopened, every event reads back as it was committed.
    async with stores(types=_types()) as store:
        again = await store.open("s")
        assert [e.data for e in await again.events()][:2] == [as_tuple.data, as_tuple.data]
        assert (await again.events())[-1].data == Doc(pair=(1, 2), names=["a", "b"])


def _refused(session: Session, data: Any, expected: str) -> None:
    """``data`` is refused with exactly ``expected`` after the place, and nothing changes."""
    before = snapshot(session)
    with pytest.raises(ValidationError) as caught:
        session.append("app/doc", data)
    assert str(caught.value) == f"session 's', seq 0, type 'app/doc': {expected}"
    assert snapshot(session) == before


REFUSALS: list[tuple[str, Any, str]] = [
    ("short tuple", Doc(pair=[1]), "Expected `array` of length 2, got 1 - at `$.pair`"),  # type: ignore[arg-type]
    ("int in a str list", {"names": ["a", 1]}, "Expected `str`, got `int` - at `$.names[1]`"),
    ("str for bytes", Doc(body="aGk="), "Expected `bytes`, got `str` ('aGk=') - at `$.body`"),  # type: ignore[arg-type]
    (
        "bytes in a free field",
        Doc(free={"k": [b"x"]}),
        "Expected a JSON value (str, int, float, bool, None, list, dict or a Struct of them), "
        "got `bytes` (it reads back as `str`) - at `$.free.k[0]`",
    ),
    (
        "uuid in a free field",
        Doc(free=uuid.UUID(int=1)),
        "Expected a JSON value (str, int, float, bool, None, list, dict or a Struct of them), "
        "got `UUID` (it reads back as `str`) - at `$.free`",
    ),
    (
        "unknown field",
        {"pair": [1, 2], "nmaes": []},
        "Object contains unknown field `nmaes` - at `$`",
    ),
    (
        "NaN",
        Doc(free=[1.0, math.nan]),
        "Expected a finite `float` (JSON has no NaN or infinity), got nan - at `$.free[1]`",
    ),
    (
        "beyond 64 bits",
        Doc(free={"n": 2**70}),
        "Expected `int` that fits 64 bits (signed), got 1180591620717411303424 - at `$.free.n`",
    ),
    (
        "a huge int is not printed whole",
        Doc(free=10**5000),
        "Expected `int` that fits 64 bits (signed), got an int of 4153 hex digits - at `$.free`",
    ),
    (
        "lone surrogate",
        Doc(free=["ok", "a\ud800"]),
        "Expected `str` without lone surrogates (they have no UTF-8 form), "
        "got 'a\\ud800' (a lone surrogate) - at `$.free[1]`",
    ),
    (
        "a huge string is cut",
        Doc(free="\ud800" + "x" * 10_000),
        "Expected `str` without lone surrogates (they have no UTF-8 form), "
        "got '\\ud800" + "x" * 50 + "... (a lone surrogate) - at `$.free`",
    ),
    (
        "non-str key",
        Doc(free={(1, 2): "x"}),
        "Expected `str` keys, got a key of type `tuple` ((1, 2)) - at `$.free`",
    ),
    ("wrong payload", TurnStart(turn=1), "Expected `Doc`, got `TurnStart` - at `$`"),
    ("not a dict", [1, 2], "Expected `Doc` or a dict of its fields, got `list` - at `$`"),
]


@pytest.mark.parametrize(
    ("data", "expected"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS]
)
async def test_every_refusal_names_what_was_expected_what_was_given_and_where(
    data: Any, expected: str
) -> None:
    async with open_store("memory:", types=_types()) as store:
        session = await store.create(session_id="s")
        _refused(session, data, expected)


async def test_nesting_refusals_name_the_limit_and_the_path() -> None:
    async with open_store("memory:", types=_types(), max_nesting=3) as store:
        session = await store.create(session_id="s")
        _refused(
            session,
            Doc(free={"a": {"b": {"c": 1}}}),
            "Expected at most 3 levels of nesting, got `dict` nested deeper - at `$.free.a.b`",
        )
        # The core vocabulary's dict form is held to the same words.
        before = snapshot(session)
        with pytest.raises(ValidationError, match=r"unknown field `parms` - at `\$`"):
            session.append("request/header", {"parms": {}})
        with pytest.raises(
            ValidationError, match=r"Expected `object \| null`, got `str` - at `\$.params`"
        ):
            session.append("request/header", {"params": "x"})
        assert snapshot(session) == before
        assert session.append("request/header", RequestHeader(params={"k": [1]})).seq == 0


class Sparse(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A payload that does not write its fields at their defaults."""

    count: int = 0
    tags: tuple[str, ...] = ()


async def test_a_field_given_at_its_default_is_not_an_unknown_field() -> None:
    types = EventTypes()
    types.register("app/sparse", Sparse)
    async with open_store("memory:", types=types) as store:
        session = await store.create(session_id="s")
        # Spelled out at its defaults (a list for the tuple), a dict is the same payload ...
        spelled = session.append("app/sparse", {"count": 0, "tags": []}).data
        assert spelled == Sparse() == session.append("app/sparse", {}).data
        # ... and a name the type does not have is still refused, naming it.
        with pytest.raises(ValidationError, match=r"unknown field `cuont` - at `\$`"):
            session.append("app/sparse", {"cuont": 1})
        assert session.head == 1
