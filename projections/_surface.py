"""``surface(session)``: the read view of the surface index (docs/architecture.md).

The index itself lives in :mod:`eventlog._surface` because the log must refuse a bad ``Replace``
at commit; it is advanced by ``Session.append``, so reading it costs nothing to catch up.
"""

from __future__ import annotations

from eventlog import PrefixView, Session, SurfaceIndex

__all__ = ("Surface", "surface")


class Surface(PrefixView[int]):
    """An immutable snapshot of the surface: the seqs whose messages the model sees, in order.

    O(1) to take: it holds the index's lists with a captured length (the index never edits a
    list a snapshot may hold), so later appends and replaces do not show through.

    :ivar generation: how many replaces had been applied when the snapshot was taken.
    """

    __slots__ = ("_balances", "_index", "generation")
    _index_name = "surface position"

    def __init__(self, index: SurfaceIndex) -> None:
        super().__init__(index.nodes)  # from node 0: ``_stop`` is the captured length
        self._index = index
        self._balances = index.balances
        self.generation = index.generation

    def __contains__(self, seq: object) -> bool:
        return isinstance(seq, int) and self.position(seq) is not None

    def position(self, seq: int) -> int | None:
        """Where ``seq`` stands on this surface, or ``None`` when it is not one of its nodes.

        O(1) while no replace happened since the snapshot was taken, O(n) after.
        """
        if self._index.generation == self.generation:
            position = self._index.position(seq)
            return position if position is not None and position < self._stop else None
        for position in range(self._stop):
            if self._items[position] == seq:
                return position
        return None

    def open_calls_before(self, position: int) -> int:
        """Tool calls proposed but not yet answered over the nodes before ``position``."""
        if not 0 <= position <= self._stop:
            raise IndexError("surface position out of range")
        return self._balances[position - 1] if position > 0 else 0

    def balanced_before(self, seq: int) -> bool:
        """Whether a cut just before node ``seq`` separates no tool call from its result.

        :raises KeyError: ``seq`` is not a node of this surface.
        """
        return self.open_calls_before(self._require(seq)) == 0

    def balanced_after(self, seq: int) -> bool:
        """Whether a cut just after node ``seq`` separates no tool call from its result.

        :raises KeyError: ``seq`` is not a node of this surface.
        """
        return self.open_calls_before(self._require(seq) + 1) == 0

    def _require(self, seq: int) -> int:
        position = self.position(seq)
        if position is None:
            raise KeyError(f"seq {seq} is not a current surface node")
        return position

    def __repr__(self) -> str:
        return f"<Surface {self._stop} nodes, generation {self.generation}>"


def surface(session: Session) -> Surface:
    """The surface of ``session`` as it stands now (O(1))."""
    return Surface(session.surface_index)
