"""request_header(session): the request settings in force, one fold for the agent and the CLI."""

from __future__ import annotations

import pytest

from eventlog import RequestHeader, Session, ToolSpec, ValidationError
from projections import request_header

pytestmark = pytest.mark.anyio

TOOLS = (ToolSpec(name="read"),)


async def test_each_field_keeps_its_last_value_until_changed(session: Session) -> None:
    # Nothing set yet: every field is None.
    assert request_header(session) == RequestHeader()
    # The first header sets everything; the second changes only the model.
    first = session.append(
        "request/header", RequestHeader(system="Be brief.", tools=TOOLS, model="m1", params={})
    ).seq
    session.append("turn/start", {"turn": 1})
    second = session.append("request/header", RequestHeader(model="m2")).seq
    assert request_header(session) == RequestHeader(
        system="Be brief.", tools=TOOLS, model="m2", params={}
    )
    # As it stood after each event: before any header, after the first, after the second.
    assert request_header(session, at=-1) == RequestHeader()
    assert request_header(session, at=first).model == "m1"
    assert request_header(session, at=first + 1).model == "m1"
    assert request_header(session, at=second) == request_header(session)


async def test_a_header_read_earlier_does_not_change(session: Session) -> None:
    session.append("request/header", RequestHeader(system="a"))
    held = request_header(session)
    session.append("request/header", RequestHeader(system="b"))
    assert (held.system, request_header(session).system) == ("a", "b")


@pytest.mark.parametrize("at", [1, -2])
async def test_a_seq_outside_the_log_is_refused(session: Session, at: int) -> None:
    session.append("request/header", RequestHeader(system="a"))
    with pytest.raises(ValidationError) as info:
        request_header(session, at=at)
    assert str(info.value) == f"session 's1': at={at} is not a seq of the log (-1..0)"
