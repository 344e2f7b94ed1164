"""A set where a sequence is declared is refused, on every payload: a list and a tuple are the
same JSON array and either is taken, but a set has no order, so the parts of a message given
as one would be stored in whatever order the set iterates (string hashes differ per process).
Payloads that may hold bytes (every message: an image's inline data) used to take it; the
others refused it. A schema that declares a set still takes one.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from eventlog import (
    APPEND,
    EventTypes,
    InboxItem,
    InboxSpliced,
    Message,
    TextPart,
    ToolCallPart,
    UserMessage,
    ValidationError,
    open_store,
)

pytestmark = pytest.mark.anyio


class Tagged(msgspec.Struct, frozen=True, kw_only=True):
    """An app type that declares a set (and bytes: not a schema of JSON types only)."""

    tags: frozenset[str]
    blob: bytes = b""


def parts(kind: type) -> Any:
    return kind({TextPart(text="one"), TextPart(text="two")})


@pytest.mark.parametrize("kind", [set, frozenset])
async def test_a_set_of_parts_is_refused_where_a_sequence_is_declared(kind: type) -> None:
    types = EventTypes()
    types.register("app/tagged", Tagged)
    async with open_store("memory:", types=types) as store:
        session = await store.create()
        # A message whose parts are a set: refused, naming the place, what and what not.
        message = Message(id="m", role="user", content=parts(kind))
        with pytest.raises(ValidationError) as caught:
            session.append("user/message", UserMessage(message=message), surface=APPEND)
        assert f"got `{kind.__name__}` - at `$.message.content`" in str(caught.value)
        # Nested: a queued item's message, tool calls of an assistant message.
        item = InboxItem(id="i", message=message)
        with pytest.raises(ValidationError, match=r"at `\$.inserted\[0\].message.content`"):
            session.append(
                "agent/inbox/spliced",
                InboxSpliced(target="next-turn", start=0, inserted=[item]),  # type: ignore[arg-type]
            )
        # The same as a dict payload.
        as_dict = {"message": {"id": "m", "role": "user", "content": parts(kind)}}
        with pytest.raises(ValidationError, match=r"at `\$.message.content`"):
            session.append("user/message", as_dict, surface=APPEND)
        assert session.head == -1
        # A list is taken, and the declared set of an app type too.
        listed = Message(id="m", role="user", content=[TextPart(text="one")])  # type: ignore[arg-type]
        session.append("user/message", UserMessage(message=listed), surface=APPEND)
        tagged = session.append("app/tagged", Tagged(tags=frozenset({"a", "b"})))
        assert tagged.data.tags == frozenset({"a", "b"})
        await session.flush()


async def test_tool_calls_given_as_a_set_are_refused() -> None:
    call = ToolCallPart(id="c", name="f", arguments="{}")
    async with open_store("memory:") as store:
        session = await store.create()
        session.append("turn/start", {"turn": 1})
        session.append("step/start", {"turn": 1, "step": 1})
        # An assistant reply whose tool calls are a set: refused, the session unchanged.
        reply = Message(id="a", role="assistant", content={call})  # type: ignore[arg-type]
        payload = {"turn": 1, "step": 1, "message": reply}
        with pytest.raises(ValidationError, match=r"got `set` - at `\$.message.content`"):
            session.append("assistant/message", payload, surface=APPEND)
        assert session.head == 1
