"""The projections' states in snapshots (docs/stores.md): the codecs of
:data:`SNAPSHOT_STATES`, which a store's snapshots carry by default (``open_store``'s
``snapshot_states``), so a session opened from a snapshot has its timeline, inbox and request
header at once, without reading the events before the snapshot.

The timeline is carried compactly: its open turn and step, the numbering, the findings, and the
calls that can still change (the open step's and every unanswered one). The answered calls of
closed steps are not carried, so on a session opened from a snapshot ``Timeline.calls()`` and
``Timeline.call()`` know only those and the calls since; a full history is ``timeline`` over a
session opened with ``verify="full"`` (what the report and the CLI's audit use). A live session
that trims at a snapshot keeps the same of its cached timeline (``TimelineState.trimmed``,
the codec's ``trim``), so it answers as if reopened from that snapshot; the
inbox and the request header are carried whole, and kept whole.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from eventlog import InboxItem, InboxTarget, RequestHeader, SnapshotState

from ._timeline import TIMELINE, Finding, OpenStep, OpenTurn, TimelineState, ToolCallState
from .header import REQUEST_HEADER
from .inbox import INBOX, InboxState

__all__ = ("SNAPSHOT_STATES",)

_Key = tuple[int, int, str]


class _Timeline(msgspec.Struct, array_like=True, frozen=True):
    seq: int
    turn: OpenTurn | None
    step: OpenStep | None
    last_turn: int
    last_step: int
    step_calls: list[_Key]
    step_proposed: int
    unanswered: list[_Key]
    calls: list[ToolCallState]
    findings: list[Finding]


_timeline_decoder = msgspec.msgpack.Decoder(_Timeline)


def _encode_timeline(state: TimelineState) -> bytes:
    return msgspec.msgpack.encode(
        _Timeline(
            seq=state.seq,
            turn=state.turn,
            step=state.step,
            last_turn=state.last_turn,
            last_step=state.last_step,
            step_calls=list(state.step_calls),
            step_proposed=state.step_proposed,
            unanswered=list(state.unanswered),
            calls=state.held_calls(),
            findings=list(state.findings),
        )
    )


def _decode_timeline(data: bytes) -> TimelineState:
    stored = _timeline_decoder.decode(data)
    return TimelineState.restore(
        seq=stored.seq,
        turn=stored.turn,
        step=stored.step,
        last_turn=stored.last_turn,
        last_step=stored.last_step,
        step_calls=[tuple(key) for key in stored.step_calls],  # type: ignore[misc]
        step_proposed=stored.step_proposed,
        unanswered=[tuple(key) for key in stored.unanswered],  # type: ignore[misc]
        calls=stored.calls,
        findings=list(stored.findings),
    )


class _Inbox(msgspec.Struct, array_like=True, frozen=True):
    seq: int
    lists: dict[InboxTarget, list[bytes]]  # each item's JSON
    ids: list[str]
    requests: dict[str, int]


def _encode_inbox(state: InboxState) -> bytes:
    lists = {
        target: [msgspec.json.encode(item) for item in items]
        for target, items in state.lists.items()
    }
    return msgspec.msgpack.encode(
        _Inbox(seq=state.seq, lists=lists, ids=sorted(state.ids), requests=state.requests)
    )


def _decode_inbox(data: bytes) -> InboxState:
    stored = msgspec.msgpack.decode(data, type=_Inbox)
    state = InboxState()
    state.seq = stored.seq
    for target, items in stored.lists.items():
        state.lists[target] = [msgspec.json.decode(raw, type=InboxItem) for raw in items]
    state.ids = set(stored.ids)
    state.requests = dict(stored.requests)
    return state


_header_decoder = msgspec.msgpack.Decoder(RequestHeader)


def _codec(
    projection: Any,
    encode: Callable[[Any], bytes],
    decode: Callable[[bytes], Any],
    trim: Callable[[Any], Any] | None = None,
) -> SnapshotState:
    return SnapshotState(
        key=projection.key,
        version=1,
        encode=encode,
        decode=decode,
        initial=projection.initial,
        apply=projection.apply,
        trim=trim,
    )


#: The timeline's, the inbox's and the request header's codecs, each at version 1: what a
#: store's snapshots carry by default. Only the timeline's state is trimmed when a live session
#: trims at a snapshot (its snapshot form leaves the answered calls of closed steps out); the
#: inbox's and the header's are carried whole, so they are kept.
SNAPSHOT_STATES: tuple[SnapshotState, ...] = (
    _codec(TIMELINE, _encode_timeline, _decode_timeline, TimelineState.trimmed),
    _codec(INBOX, _encode_inbox, _decode_inbox),
    _codec(REQUEST_HEADER, msgspec.msgpack.encode, _header_decoder.decode),
)
