"""The surface index: which events' messages the model sees, and its one transition function.

The same code serves commit-time planning (``Session.append`` refuses a bad operation before
anything changes) and the fold that rebuilds the index when a session is opened
(:func:`fold_surface`).

Invariants the index keeps:

- ``nodes`` is the ordered list of seqs on the surface;
- ``balances[k]`` is (tool calls proposed) minus (tool results) over ``nodes[0..k]``;
- a ``Replace`` may not cut between an assistant tool call and its result: the balance before
  ``start`` and after ``end`` must both be zero, and the replacing message must itself carry no
  unpaired call or result. The one exception is pruning: a ``tool/result`` shadowing exactly one
  ``tool/result`` and changing only its content (and its message id).

Readers may hold ``nodes`` and ``balances`` with a captured length: an append only adds past
the end, and a replace installs *new* lists, so a held prefix never changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from ._errors import SurfaceError
from ._event import Event, Replace, SurfaceOp
from ._message import Message, ToolCallPart, ToolResultPart
from ._vocabulary import ToolResult

__all__ = (
    "SurfaceIndex",
    "SurfaceTransition",
    "fold_surface",
    "message_delta",
    "plan_transition",
)


def message_delta(message: Message) -> int:
    """How a message changes the call/result balance (calls proposed minus results)."""
    delta = 0
    for part in message.content:
        if isinstance(part, ToolCallPart):
            delta += 1
        elif isinstance(part, ToolResultPart):
            delta -= 1
    return delta


@dataclass(frozen=True, slots=True)
class SurfaceTransition:
    """A planned, validated change to the index; apply with :meth:`SurfaceIndex.apply`."""

    seq: int
    delta: int
    first: int  # position of the first shadowed node; == len(nodes) for an append
    last: int  # position of the last shadowed node; == first - 1 for an append


class SurfaceIndex:
    """The current surface. Mutated only through :meth:`apply` of a planned transition."""

    __slots__ = ("_balances", "_deltas", "_nodes", "_positions", "generation")

    def __init__(self) -> None:
        self._nodes: list[int] = []
        self._balances: list[int] = []
        self._deltas: dict[int, int] = {}
        self._positions: dict[int, int] = {}
        #: How many replaces have been applied; views compare it to notice a rebuild.
        self.generation = 0

    @property
    def nodes(self) -> list[int]:
        """The seqs on the surface, in order. Do not mutate."""
        return self._nodes

    @property
    def balances(self) -> list[int]:
        """``balances[k]``: open tool calls over ``nodes[0..k]``. Do not mutate."""
        return self._balances

    def __len__(self) -> int:
        return len(self._nodes)

    def position(self, seq: int) -> int | None:
        """Where ``seq`` stands on the surface, or ``None`` when it is not a current node."""
        return self._positions.get(seq)

    def balance_before(self, position: int) -> int:
        """Open tool calls over the nodes before ``position``."""
        return self._balances[position - 1] if position > 0 else 0

    def append_node(self, seq: int, delta: int) -> None:
        """Append ``seq`` with its call/result ``delta`` (loading a stored, valid log)."""
        self._deltas[seq] = delta
        self._positions[seq] = len(self._nodes)
        self._balances.append((self._balances[-1] if self._balances else 0) + delta)
        self._nodes.append(seq)

    def apply(self, transition: SurfaceTransition) -> None:
        """Apply a transition planned against this very state (O(1) for an append)."""
        seq, first, last = transition.seq, transition.first, transition.last
        if first == len(self._nodes):
            self.append_node(seq, transition.delta)
            return
        self._deltas[seq] = transition.delta
        # A replace: rare, so rebuilding the tail is fine. New lists, never an in-place edit,
        # so that a reader holding the old ones with a captured length sees no change.
        for shadowed in self._nodes[first : last + 1]:
            del self._positions[shadowed]
            del self._deltas[shadowed]
        nodes = self._nodes[:first]
        balances = self._balances[:first]
        running = balances[-1] if balances else 0
        for node in (seq, *self._nodes[last + 1 :]):
            self._positions[node] = len(nodes)
            running += self._deltas[node]
            nodes.append(node)
            balances.append(running)
        self._nodes, self._balances = nodes, balances
        self.generation += 1

    def __repr__(self) -> str:
        return f"<SurfaceIndex {len(self._nodes)} nodes, generation {self.generation}>"


def plan_transition(
    index: SurfaceIndex,
    *,
    seq: int,
    type_: str,
    data: Any,
    op: SurfaceOp,
    sources: tuple[int, ...],
    session_id: str,
    payload_of: Callable[[int], Any] | None = None,
) -> SurfaceTransition:
    """Validate ``op`` for the event about to be committed; never mutates ``index``.

    :param data: the validated payload; every surface type carries a ``message``.
    :param payload_of: looks up the payload of a current surface node by seq (needed only to
        check a pruning replace; without it a pruning replace is refused).
    :raises SurfaceError: the replace span is not a run of current nodes in order, the sources
        do not cover every shadowed node, the replace would separate a tool call from its
        result, or a ``tool/result`` replacement is not a pruning of exactly one result.
    """
    message: Message = data.message
    delta = message_delta(message)
    if not isinstance(op, Replace):
        n = len(index._nodes)
        return SurfaceTransition(seq, delta, n, n - 1)
    where = f"session {session_id!r}, seq {seq}: Replace({op.start}, {op.end})"

    def refuse(reason: str) -> SurfaceError:
        return SurfaceError(f"{where}: {reason}", session_id=session_id, seq=seq)

    first, last = index.position(op.start), index.position(op.end)
    if first is None or last is None:
        missing = op.start if first is None else op.end
        raise refuse(f"seq {missing} is not a current surface node")
    if first > last:
        raise refuse("start comes after end on the surface")
    shadowed = index.nodes[first : last + 1]
    covered = set(sources)
    uncovered = [node for node in shadowed if node not in covered]
    if uncovered:
        raise refuse(f"sources do not cover shadowed node(s) {uncovered}")
    if type_ == "tool/result":
        reason = _pruning_refusal(shadowed, data, payload_of)
        if reason is not None:
            raise refuse(reason)
        return SurfaceTransition(seq, delta, first, last)
    before = index.balance_before(first)
    after = index.balance_before(last + 1)
    if before != 0 or after != 0:
        raise refuse(
            f"would separate a tool call from its result ({before} call(s) open before the "
            f"span, {after} after it)"
        )
    if delta != 0:
        raise refuse(f"a replacing {type_} must not carry tool calls or tool results")
    return SurfaceTransition(seq, delta, first, last)


def _pruning_refusal(
    shadowed: list[int], data: Any, payload_of: Callable[[int], Any] | None
) -> str | None:
    """Why a ``tool/result`` replacement is not a pruning, or ``None`` when it is one.

    A pruning shadows exactly one ``tool/result`` and differs from it only in the content of its
    result (a fresh message id is allowed: it is a new message).
    """
    if len(shadowed) != 1:
        return f"a tool/result replacement must shadow exactly one node, not {len(shadowed)}"
    old = payload_of(shadowed[0]) if payload_of is not None else None
    if not isinstance(old, ToolResult):
        return f"a tool/result replacement must shadow a tool/result; seq {shadowed[0]} is not one"
    new_content = data.message.content
    same_but_content = (
        len(old.message.content) == 1
        and isinstance(old.message.content[0], ToolResultPart)
        and len(new_content) == 1
        and isinstance(new_content[0], ToolResultPart)
        and data == _with_content(old, data.message.id, new_content[0].content)
    )
    if not same_but_content:
        return (
            f"a tool/result replacement may change only the content of the result it shadows "
            f"(seq {shadowed[0]})"
        )
    return None


def _with_content(old: ToolResult, message_id: str, content: object) -> ToolResult:
    part = msgspec.structs.replace(old.message.content[0], content=content)
    message = msgspec.structs.replace(old.message, id=message_id, content=(part,))
    return msgspec.structs.replace(old, message=message)


def fold_surface(events: Sequence[Event], *, session_id: str = "") -> SurfaceIndex:
    """The surface index after ``events`` (a log prefix starting at seq 0), validated as at commit.

    :raises SurfaceError: an event's surface operation is not allowed.
    """
    index = SurfaceIndex()

    def payload_of(seq: int) -> Any:
        return events[seq].data

    for event in events:
        if event.surface is not None:
            transition = plan_transition(
                index,
                seq=event.seq,
                type_=event.type,
                data=event.data,
                op=event.surface,
                sources=event.sources,
                session_id=session_id,
                payload_of=payload_of,
            )
            index.apply(transition)
    return index
