"""The immutable view over a list that only grows: a session's events, a projection's snapshot.

One shape serves both. ``Session.window()`` hands out the events held in memory this way, and the
projections hand out their snapshots (``messages``, ``surface``) the same way: O(1) to make, it
copies nothing, and a view a reader holds never changes, because the list it watches is only
ever appended to past the captured bounds (a rebuild makes a new list).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import ClassVar, TypeVar, overload

__all__ = ("PrefixView",)

T = TypeVar("T")


class PrefixView(Sequence[T]):
    """An immutable sequence: the items ``start..stop`` of a list, bounds captured when made.

    The list it holds is only ever appended to (a rebuild makes a new list), so the view never
    changes. O(1) to make; it copies nothing. A slice is a tuple (a copy). Equal to a list, a
    tuple or a view of the same kind with the same items; unhashable, like a list.

    :param items: the list watched; the caller promises never to edit what the view covers.
    :param start: the first index covered (default 0).
    :param stop: one past the last index covered (default: the list's length now); a ``stop``
        below ``start`` makes an empty view.
    """

    __slots__ = ("_items", "_start", "_stop")

    #: What an index means, for the :class:`IndexError` message.
    _index_name: ClassVar[str] = "index"

    def __init__(self, items: list[T], start: int = 0, stop: int | None = None) -> None:
        self._items = items
        self._start = start
        self._stop = len(items) if stop is None else max(start, stop)

    def __len__(self) -> int:
        return self._stop - self._start

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...
    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        if isinstance(index, slice):
            return tuple(self._items[self._start : self._stop][index])
        length = self._stop - self._start
        if index < 0:
            index += length
        if not 0 <= index < length:
            raise IndexError(f"{self._index_name} out of range")
        return self._items[self._start + index]

    def __iter__(self) -> Iterator[T]:
        return itertools.islice(self._items, self._start, self._stop)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (type(self), list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {len(self)} items>"
