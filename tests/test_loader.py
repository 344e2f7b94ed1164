"""Loading a stored log: the fast path gives the same events as the general decoder, and every
kind of bad row is named precisely (seq, and why)."""

from __future__ import annotations

import msgspec
import pytest

from benchmarks.workload import turn_events
from eventlog import (
    APPEND,
    CorruptLogError,
    EventTypes,
    Message,
    Replace,
    UnsupportedFormatError,
    UserMessage,
)
from eventlog._codec import GENESIS_HASH, Row, chain_hash, decode_event, encode_payload, make_row
from eventlog.stores import LogLoader


def _rows(events: list[tuple[str, object, object, tuple[int, ...]]]) -> list[Row]:
    types, rows, prev = EventTypes(), [], GENESIS_HASH
    for seq, (type_, data, surface, sources) in enumerate(events):
        info = types.get(type_)
        assert info is not None
        _, raw = encode_payload(info, data, session_id="s", seq=seq)
        row = make_row(prev, seq, type_, 1000 + seq, surface, sources, False, raw)  # type: ignore[arg-type]
        rows.append(row)
        prev = row.hash
    return rows


def _standard(turns: int = 2) -> list[Row]:
    return _rows([(t, d, s, ()) for turn in range(1, turns + 1) for t, d, s in turn_events(turn)])


def _rehash(rows: list[Row]) -> list[Row]:
    """Recompute the chain over (possibly edited) rows, as a forger would."""
    out, prev = [], GENESIS_HASH
    for r in rows:
        digest = chain_hash(prev, r.seq, r.type, r.time, r.surface, r.sources, r.ignorable, r.data)
        out.append(msgspec.structs.replace(r, hash=digest))
        prev = digest
    return out


def test_the_fast_path_equals_the_general_decoder_and_rebuilds_the_surface() -> None:
    rows = _standard()
    loader = LogLoader(EventTypes(), "s")
    loader.feed(rows[:7])
    loader.feed(rows[7:])
    expected = [decode_event(r, EventTypes(), session_id="s") for r in rows]
    assert [msgspec.to_builtins(e) for e in loader.events] == [
        msgspec.to_builtins(e) for e in expected
    ]
    assert loader.last_hash == rows[-1].hash
    surfaced = [r.seq for r in rows if r.surface == "append"]
    assert loader.surface.nodes == surfaced
    assert loader.surface.balances[-1] == 0


def test_a_replace_is_refolded_with_its_checks() -> None:
    rows = _rows(
        [
            ("user/message", UserMessage(message=Message.user("a")), APPEND, ()),
            ("user/message", UserMessage(message=Message.user("b")), APPEND, ()),
            ("user/message", UserMessage(message=Message.user("sum")), Replace(0, 1), (0, 1)),
        ]
    )
    loader = LogLoader(EventTypes(), "s")
    loader.feed(rows)
    assert loader.surface.nodes == [2]
    assert loader.surface.generation == 1


def test_a_gap_in_seqs_is_named() -> None:
    rows = _standard(1)
    loader = LogLoader(EventTypes(), "s")
    with pytest.raises(CorruptLogError, match="seq 3: expected event 3, found 4"):
        loader.feed(rows[:3] + rows[4:])
    assert len(loader.events) == 3


def test_a_payload_that_does_not_decode_is_named_even_with_a_forged_chain() -> None:
    rows = _standard(1)
    rows[5] = msgspec.structs.replace(rows[5], data=b'{"turn": "x"}')
    loader = LogLoader(EventTypes(), "s")
    with pytest.raises(CorruptLogError, match=r"seq 5: stored event of type .* does not decode"):
        loader.feed(_rehash(rows))
    assert len(loader.events) == 5


def test_an_invalid_stored_surface_operation_is_named() -> None:
    rows = _standard(1)
    rows[2] = msgspec.structs.replace(rows[2], surface="replace:0:0")
    loader = LogLoader(EventTypes(), "s")
    with pytest.raises(CorruptLogError, match="seq 2: stored surface operation is invalid"):
        loader.feed(_rehash(rows))


def test_an_unknown_type_is_refused_unless_ignorable() -> None:
    rows = _standard(1)
    rows[4] = msgspec.structs.replace(rows[4], type="app/gone")
    with pytest.raises(UnsupportedFormatError, match="seq 4: event type 'app/gone'"):
        LogLoader(EventTypes(), "s").feed(_rehash(rows))
    rows[4] = msgspec.structs.replace(rows[4], ignorable=True)
    loader = LogLoader(EventTypes(), "s")
    loader.feed(_rehash(rows))
    assert loader.events[4].type == "app/gone" and loader.events[4].ignorable
