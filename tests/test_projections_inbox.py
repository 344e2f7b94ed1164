"""inbox(session): the fold of agent/inbox/spliced, its builders, the request-id index, forks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventlog import (
    APPEND,
    InboxItem,
    InboxSpliced,
    Message,
    Session,
    TurnEnd,
    TurnStart,
    UserMessage,
    ValidationError,
    open_store,
)
from eventlog._vocabulary import InboxTarget
from projections import Inbox, inbox
from projections.base import fold
from projections.inbox import (
    INBOX,
    cancel,
    cancel_all,
    claim,
    enqueue,
    normalize_splice,
    splice,
)

pytestmark = pytest.mark.anyio


def put(session: Session, payload: InboxSpliced | None) -> int:
    assert payload is not None
    return session.append("agent/inbox/spliced", payload).seq


def item_ids(view: Inbox) -> tuple[list[str], list[str]]:
    return [i.id for i in view.next_turn], [i.id for i in view.next_step]


def message(name: str, request_id: str | None = None) -> Message:
    return Message.user(name, id=name, request_id=request_id)


# -- builders and fold ------------------------------------------------------------------------


async def test_enqueue_appends_to_the_chosen_list(session: Session) -> None:
    put(session, enqueue(inbox(session), "next-turn", message("t1")))
    put(session, enqueue(inbox(session), "next-step", message("s1")))
    put(session, enqueue(inbox(session), "next-turn", message("t2")))
    put(session, enqueue(inbox(session), "next-turn", message("t0"), front=True))
    view = inbox(session)
    assert item_ids(view) == (["t0", "t1", "t2"], ["s1"])
    assert "t1" in view and "zz" not in view
    assert len(view) == 4
    assert [i.id for i in view] == ["s1", "t0", "t1", "t2"]
    assert view.seq == 3


async def test_enqueue_payload_is_normalized(session: Session) -> None:
    put(session, enqueue(inbox(session), "next-step", message("a")))
    payload = enqueue(inbox(session), "next-step", message("b"), wake=False)
    assert payload == InboxSpliced(
        target="next-step",
        start=1,
        removed=0,
        inserted=(InboxItem(id="b", message=message("b"), wake=False),),
    )


async def test_wakes(session: Session) -> None:
    put(session, enqueue(inbox(session), "next-step", message("a"), wake=False))
    assert not inbox(session).wakes
    put(session, enqueue(inbox(session), "next-step", message("b")))
    assert inbox(session).wakes


async def test_claim_for_a_new_turn_takes_next_step_and_the_first_next_turn_item(
    session: Session,
) -> None:
    put(session, enqueue(inbox(session), "next-turn", message("t1")))
    put(session, enqueue(inbox(session), "next-turn", message("t2")))
    put(session, enqueue(inbox(session), "next-step", message("s1")))
    put(session, enqueue(inbox(session), "next-step", message("s2")))
    taken = claim(inbox(session), "next-turn")
    assert [i.id for i in taken.items] == ["s1", "s2", "t1"]
    assert taken.splices == (
        InboxSpliced(target="next-step", start=0, removed=2, outcome="claimed"),
        InboxSpliced(target="next-turn", start=0, removed=1, outcome="claimed"),
    )
    for payload in taken.splices:
        put(session, payload)
    assert item_ids(inbox(session)) == (["t2"], [])


async def test_claim_for_a_step_takes_only_next_step(session: Session) -> None:
    put(session, enqueue(inbox(session), "next-turn", message("t1")))
    put(session, enqueue(inbox(session), "next-step", message("s1")))
    taken = claim(inbox(session), "next-step")
    assert [i.id for i in taken.items] == ["s1"]
    for payload in taken.splices:
        put(session, payload)
    assert item_ids(inbox(session)) == (["t1"], [])
    assert claim(inbox(session), "next-step").splices == ()


async def test_cancel_one_and_all(session: Session) -> None:
    for name in ("a", "b", "c"):
        put(session, enqueue(inbox(session), "next-turn", message(name)))
    put(session, enqueue(inbox(session), "next-step", message("d")))
    payload = cancel(inbox(session), "b")
    assert payload == InboxSpliced(target="next-turn", start=1, removed=1, outcome="canceled")
    put(session, payload)
    assert item_ids(inbox(session)) == (["a", "c"], ["d"])
    payloads = cancel_all(inbox(session))
    assert [(p.target, p.removed, p.outcome) for p in payloads] == [
        ("next-step", 1, "canceled"),
        ("next-turn", 2, "canceled"),
    ]
    for p in payloads:
        put(session, p)
    assert len(inbox(session)) == 0
    assert cancel_all(inbox(session)) == ()


async def test_builder_refusals(session: Session) -> None:
    put(session, enqueue(inbox(session), "next-turn", message("a", request_id="r1")))
    view = inbox(session)
    cases: list[tuple[Callable[[], object], str]] = [
        (lambda: enqueue(view, "next-step", message("a")), "inbox item id 'a' is already pending"),
        (
            lambda: enqueue(view, "next-step", message("b", request_id="r1")),
            "request id 'r1' was already submitted at seq 0",
        ),
        (lambda: cancel(view, "zz"), "inbox item id 'zz' is not pending"),
        (
            lambda: splice(view, "next-turn", 0, 1),
            "an inbox splice that removes items needs an outcome",
        ),
        (
            lambda: splice(view, "next-step", 0, 0, [_item("x")], outcome="claimed"),
            "outcome 'claimed' given for a splice that removes nothing",
        ),
        (
            lambda: splice(view, "next-step", 0, 0, [_item("x"), _item("x")]),
            "inbox item id 'x' is already pending",
        ),
        (
            lambda: splice(view, "later", 0, 0, [_item("x")]),  # type: ignore[arg-type]
            "inbox target 'later' is not 'next-turn' or 'next-step'",
        ),
        (
            lambda: claim(view, "now"),  # type: ignore[arg-type]
            "inbox target 'now' is not 'next-turn' or 'next-step'",
        ),
    ]
    for build, expected in cases:
        with pytest.raises(ValidationError) as info:
            build()
        assert str(info.value) == expected


async def test_a_splice_may_reinsert_an_id_it_removes(session: Session) -> None:
    put(session, enqueue(inbox(session), "next-turn", message("a")))
    edited = InboxItem(id="a", message=Message.user("edited", id="a"))
    put(session, splice(inbox(session), "next-turn", 0, 1, [edited], outcome="canceled"))
    assert inbox(session).next_turn == (edited,)


async def test_a_no_op_splice_builds_nothing(session: Session) -> None:
    assert splice(inbox(session), "next-turn", 5, 3) is None


@pytest.mark.parametrize(
    ("length", "start", "removed", "expected"),
    [
        (3, 1, 1, (1, 1)),
        (3, -1, 5, (2, 1)),
        (3, -7, 1, (0, 1)),
        (3, 9, 2, (3, 0)),
        (3, 0, -2, (0, 0)),
        (0, 0, 1, (0, 0)),
    ],
)
def test_normalize_splice(length: int, start: int, removed: int, expected: tuple[int, int]) -> None:
    assert normalize_splice(length, start, removed) == expected


async def test_fold_normalizes_raw_coordinates_and_skips_duplicate_ids(session: Session) -> None:
    put(session, InboxSpliced(target="next-turn", start=0, inserted=(_item("a"), _item("b"))))
    # Written by a careless producer: negative start, too many removed, a pending id again.
    put(session, InboxSpliced(target="next-turn", start=-1, removed=9, outcome="canceled"))
    put(session, InboxSpliced(target="next-step", start=7, inserted=(_item("a"), _item("c"))))
    assert item_ids(inbox(session)) == (["a"], ["c"])
    assert fold(INBOX, (await session.events())).view() == inbox(session)


# -- snapshots --------------------------------------------------------------------------------


async def test_an_unchanged_inbox_returns_the_same_snapshot(session: Session) -> None:
    put(session, enqueue(inbox(session), "next-turn", message("a")))
    first = inbox(session)
    session.append("turn/start", TurnStart(turn=1))
    assert inbox(session) is first


async def test_a_held_snapshot_never_changes(session: Session) -> None:
    put(session, enqueue(inbox(session), "next-turn", message("a", request_id="r1")))
    held = inbox(session)
    put(session, enqueue(inbox(session), "next-turn", message("b", request_id="r2")))
    put(session, cancel(inbox(session), "a"))
    assert item_ids(held) == (["a"], [])
    assert held.request_seq("r2") is None and "b" not in held
    assert held.requests() == {"r1": 0}
    assert inbox(session).requests() == {"r1": 0, "r2": 1}


async def test_history_at_a_seq(session: Session) -> None:
    put(session, enqueue(inbox(session), "next-turn", message("a")))
    put(session, cancel(inbox(session), "a"))
    assert item_ids(inbox(session, at=0)) == (["a"], [])
    assert item_ids(inbox(session, at=-1)) == ([], [])
    with pytest.raises(ValidationError):
        inbox(session, at=2)


# -- request ids ------------------------------------------------------------------------------


async def test_request_ids_are_indexed_from_inbox_items_and_user_messages(
    session: Session,
) -> None:
    put(session, enqueue(inbox(session), "next-turn", message("a"), request_id="r1"))
    data = UserMessage(message=message("u", request_id="r2"))
    seq = session.append("user/message", data, surface=APPEND).seq
    put(session, cancel(inbox(session), "a"))
    view = inbox(session)
    assert view.request_seq("r1") == 0  # canceled, but it was submitted: still a duplicate
    assert view.request_seq("r2") == seq
    assert view.request_seq("r3") is None


async def test_a_fork_does_not_inherit_the_pending_inbox() -> None:
    async with open_store("memory:") as store:
        parent = await store.create(session_id="p")
        put(parent, enqueue(inbox(parent), "next-turn", message("t1", request_id="r1")))
        put(parent, enqueue(inbox(parent), "next-turn", message("t2", request_id="r2")))
        parent.append("turn/start", TurnStart(turn=1))
        for payload in claim(inbox(parent), "next-turn").splices:
            put(parent, payload)
        parent.append("turn/end", TurnEnd(turn=1, reason="completed"))
        await parent.flush()
        assert item_ids(inbox(parent)) == (["t2"], [])
        child = await store.fork("p", parent.head)
        view = inbox(child)
        assert item_ids(view) == ([], [])
        assert view.request_seq("r1") == 0  # claimed into the shared history
        assert view.request_seq("r2") is None  # was pending: the child may admit it
        assert fold(INBOX, (await child.events())).view() == view


# -- random splice sequences ------------------------------------------------------------------

NAMES = [f"m{i}" for i in range(8)]
ops = st.lists(
    st.tuples(
        st.sampled_from(["splice", "raw", "claim-turn", "claim-step", "cancel", "enqueue"]),
        st.sampled_from(["next-turn", "next-step"]),
        st.integers(-4, 6),  # start
        st.integers(-1, 4),  # removed
        st.lists(st.sampled_from(NAMES), max_size=3),  # inserted ids (may repeat)
    ),
    max_size=25,
)


@given(ops=ops)
async def test_random_splice_sequences_fold_to_the_live_state(
    ops: list[tuple[str, str, int, int, list[str]]],
) -> None:
    async with open_store("memory:") as store:
        session = await store.create()
        model: dict[str, list[str]] = {"next-turn": [], "next-step": []}
        held: list[tuple[Inbox, tuple[list[str], list[str]]]] = []
        for kind, target, start, removed, names in ops:
            view = inbox(session)
            for payload in _build(view, kind, target, start, removed, names):
                _model_apply(model, payload)
                put(session, payload)
            live = inbox(session)
            assert item_ids(live) == (model["next-turn"], model["next-step"])
            assert fold(INBOX, (await session.events())).view() == live
            held.append((live, item_ids(live)))
        for snapshot, ids in held:
            assert item_ids(snapshot) == ids


def _build(
    view: Inbox, kind: str, where: str, start: int, removed: int, names: list[str]
) -> list[InboxSpliced]:
    pending = [i.id for i in view]
    target = cast(InboxTarget, where)
    if kind == "raw":  # unnormalized, possibly duplicate ids: the fold must cope
        items = tuple(_item(n) for n in names)
        outcome: Literal["canceled"] | None = "canceled" if removed > 0 else None
        return [
            InboxSpliced(
                target=target, start=start, removed=removed, inserted=items, outcome=outcome
            )
        ]
    if kind.startswith("claim"):
        return list(claim(view, "next-turn" if kind == "claim-turn" else "next-step").splices)
    if kind == "cancel":
        return [cancel(view, pending[start % len(pending)])] if pending else []
    fresh = [n for n in dict.fromkeys(names) if n not in pending]
    if kind == "enqueue":
        return [enqueue(view, target, message(n)) for n in fresh[:1]]
    removes = normalize_splice(len(view.items(target)), start, removed)[1] > 0
    inserted = [_item(n) for n in fresh]
    payload = splice(
        view, target, start, removed, inserted, outcome="canceled" if removes else None
    )
    return [payload] if payload is not None else []


def _model_apply(model: dict[str, list[str]], payload: InboxSpliced) -> None:
    """An independent model of a splice: JavaScript ``Array.prototype.splice`` semantics."""
    items = model[payload.target]
    start = payload.start
    start = max(len(items) + start, 0) if start < 0 else min(start, len(items))
    count = max(0, min(payload.removed, len(items) - start))
    del items[start : start + count]
    pending = set(model["next-turn"]) | set(model["next-step"])
    inserted = []
    for item in payload.inserted:
        if item.id not in pending:
            pending.add(item.id)
            inserted.append(item.id)
    items[start:start] = inserted


def _item(name: str) -> InboxItem:
    return InboxItem(id=name, message=message(name))
