"""The surface index: which events' messages the model sees, and its one transition function.

The same code serves commit-time planning (``Session.append`` refuses a bad operation before
anything changes) and the fold that rebuilds the index when a session is opened.

Invariants the index keeps:

- ``nodes`` is the ordered list of seqs on the surface;
- ``balance[k]`` is (tool calls proposed) minus (tool results) over ``nodes[0..k]``;
- a ``Replace`` may not cut between an assistant tool call and its result: the balance before
  ``start`` and after ``end`` must both be zero, except for pruning (a ``tool/result`` shadowing
  exactly one ``tool/result`` of the same call and changing only its content).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import SurfaceError
from .event import Replace, SurfaceOp
from .message import Message

__all__ = ("SurfaceIndex", "SurfaceTransition", "plan_transition")


def _delta(message: Message) -> int:
    """How a message changes the call/result balance."""
    delta = 0
    for part in message.content:
        kind = type(part).__name__
        if kind == "ToolCallPart":
            delta += 1
        elif kind == "ToolResultPart":
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

    __slots__ = ("_balance", "_deltas", "_nodes", "_positions", "generation")

    def __init__(self) -> None:
        self._nodes: list[int] = []
        self._balance: list[int] = []
        self._deltas: dict[int, int] = {}
        self._positions: dict[int, int] = {}
        #: How many replaces have been applied; views compare it to notice a rebuild.
        self.generation = 0

    @property
    def nodes(self) -> list[int]:
        """The seqs on the surface, in order. Do not mutate."""
        return self._nodes

    def __len__(self) -> int:
        return len(self._nodes)

    def position(self, seq: int) -> int | None:
        """Where ``seq`` stands on the surface, or ``None`` when it is not a current node."""
        return self._positions.get(seq)

    def balance_before(self, position: int) -> int:
        """Open tool calls over the nodes before ``position``."""
        return self._balance[position - 1] if position > 0 else 0

    def apply(self, transition: SurfaceTransition) -> None:
        """Apply a transition planned against this very state (O(1) for an append)."""
        seq, first, last = transition.seq, transition.first, transition.last
        self._deltas[seq] = transition.delta
        if first == len(self._nodes):
            self._positions[seq] = first
            self._nodes.append(seq)
            self._balance.append(self.balance_before(first) + transition.delta)
            return
        # A replace: rare, so rebuilding the tail is fine.
        tail = self._nodes[last + 1 :]
        for shadowed in self._nodes[first : last + 1]:
            del self._positions[shadowed]
            del self._deltas[shadowed]
        del self._nodes[first:]
        del self._balance[first:]
        for node in (seq, *tail):
            self._positions[node] = len(self._nodes)
            self._balance.append(self.balance_before(len(self._nodes)) + self._deltas[node])
            self._nodes.append(node)
        self.generation += 1


def plan_transition(
    index: SurfaceIndex,
    *,
    seq: int,
    type_: str,
    data: Any,
    op: SurfaceOp,
    sources: tuple[int, ...],
    session_id: str,
    payload_of: Any = None,
) -> SurfaceTransition:
    """Validate ``op`` for the event about to be committed; never mutates ``index``.

    :param payload_of: looks up the payload of a current surface node by seq (needed only to
        check a pruning replace).
    :raises SurfaceError: the replace span is not a run of current nodes in order, the sources
        do not cover every shadowed node, or the replace would separate a tool call from its
        result.
    """
    message: Message = data.message
    delta = _delta(message)
    if not isinstance(op, Replace):
        n = len(index)
        return SurfaceTransition(seq, delta, n, n - 1)
    where = f"session {session_id!r}, seq {seq}: Replace({op.start}, {op.end})"
    first, last = index.position(op.start), index.position(op.end)
    if first is None or last is None:
        missing = op.start if first is None else op.end
        raise SurfaceError(
            f"{where}: seq {missing} is not a current surface node",
            session_id=session_id,
            seq=seq,
        )
    if first > last:
        raise SurfaceError(
            f"{where}: start comes after end on the surface", session_id=session_id, seq=seq
        )
    shadowed = index.nodes[first : last + 1]
    uncovered = [node for node in shadowed if node not in set(sources)]
    if uncovered:
        raise SurfaceError(
            f"{where}: sources do not cover shadowed node(s) {uncovered}",
            session_id=session_id,
            seq=seq,
        )
    if type_ == "tool/result":
        _check_pruning(where, index, shadowed, message, payload_of, session_id, seq)
        return SurfaceTransition(seq, delta, first, last)
    before = index.balance_before(first)
    after = index.balance_before(last + 1)
    if before != 0 or after != 0 or delta != 0:
        raise SurfaceError(
            f"{where}: would separate a tool call from its result",
            session_id=session_id,
            seq=seq,
        )
    return SurfaceTransition(seq, delta, first, last)


def _check_pruning(
    where: str,
    index: SurfaceIndex,
    shadowed: list[int],
    message: Message,
    payload_of: Any,
    session_id: str,
    seq: int,
) -> None:
    """A ``tool/result`` replacement prunes: one ``tool/result`` of the same call, only its
    content changed."""
    old: Message | None = None
    if payload_of is not None and len(shadowed) == 1:
        old = getattr(payload_of(shadowed[0]), "message", None)
    new_parts = message.tool_results
    old_parts = old.tool_results if old is not None else ()
    same_call = (
        old is not None
        and old.role == "tool"
        and len(old_parts) == 1
        and len(new_parts) == 1
        and len(message.content) == 1
        and old_parts[0].call_id == new_parts[0].call_id
        and old_parts[0].is_error == new_parts[0].is_error
    )
    if not same_call:
        raise SurfaceError(
            f"{where}: a tool/result replacement must shadow exactly one tool/result of the "
            "same call and change only its content",
            session_id=session_id,
            seq=seq,
        )
