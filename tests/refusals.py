"""What the integrations' refusal properties share: hostile values, a way to plant one in an
otherwise valid argument, and the whole SQLite file as rows (the store, byte for byte).

A refused call must raise a typed error and leave the store exactly as it was, once whatever
the call queued has had its chance to be written (a flush): :func:`dump` reads every table of
the file through a connection of its own, so a half-committed call shows however it got there.
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

__all__ = ("LONE", "MAX_EVENT_BYTES", "dump", "hostile", "planted", "thread_ids")

LONE = "\ud800"
#: The stores of these tests take events up to this size, so a "huge" string is cheap.
MAX_EVENT_BYTES = 4096


def _deep(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for i in range(depth):
        value = {"a": value} if i % 2 else [value]
    return value


#: Values no event can hold, each of a different kind.
HOSTILE: list[Any] = [
    math.nan,
    math.inf,
    -math.inf,
    b"bytes",
    bytearray(b"x"),
    2**64,
    -(2**70),
    10**400,
    _deep(70),
    # Past every nesting limit, yet shallow enough for hypothesis to print a failing example
    # (a value too deep for repr is one of the messages' own cases, tested by example).
    _deep(300),
    LONE,
    f"text{LONE}",
    {LONE: 1},
    {1: "int key"},
    {(1, 2): "tuple key"},
    {None: "none key"},
    "x" * (2 * MAX_EVENT_BYTES),
    {1, 2},
    object(),
]


def hostile() -> st.SearchStrategy[Any]:
    """One hostile value."""
    return st.sampled_from(HOSTILE)


@st.composite
def planted(draw: st.DrawFn, template: Any) -> Any:
    """``template`` (JSON: dicts, lists, leaves) with one hostile value put in it: in place of
    a leaf, as a new key's value, or as the whole value."""
    bad = draw(hostile())
    paths: list[tuple[Any, ...]] = [()]
    stack: list[tuple[Any, tuple[Any, ...]]] = [(template, ())]
    while stack:
        node, path = stack.pop()
        children = (
            node.items()
            if isinstance(node, dict)
            else enumerate(node)
            if isinstance(node, list)
            else ()
        )
        for key, child in children:
            paths.append((*path, key))
            stack.append((child, (*path, key)))
    path = draw(st.sampled_from(paths))
    if not path:
        return bad
    new = draw(st.booleans())
    return _set(template, path, bad, new_key=new)


def _set(node: Any, path: tuple[Any, ...], value: Any, *, new_key: bool) -> Any:
    """A copy of ``node`` with ``value`` at ``path`` (or beside it, under a new key)."""
    head, rest = path[0], path[1:]
    if isinstance(node, dict):
        copy = dict(node)
        if rest:
            copy[head] = _set(node[head], rest, value, new_key=new_key)
        elif new_key:
            copy["planted"] = value
        else:
            copy[head] = value
        return copy
    copy_list = list(node)
    copy_list[head] = value if not rest else _set(node[head], rest, value, new_key=new_key)
    return copy_list


def thread_ids() -> st.SearchStrategy[Any]:
    """Ids a user could pass: awkward text of every kind, and values that are not text."""
    awkward = st.sampled_from(
        [
            "t\n",
            "t\r\n",
            "\n",
            "",
            " ",
            "t/../x",
            "T",
            "t",
            "a" * 120,
            "a" * 121,
            "a" * 10_000,
            f"t{LONE}",
            LONE,
            "\udcff\ud800",
            "é",
            "e\u0301",
            "\x00",
            "lgh-" + "0" * 64,
            "lg-x",
        ]
    )
    return st.one_of(awkward, st.text(max_size=20), st.sampled_from([None, 1, b"t", ["t"], 1.5]))


def dump(path: Path) -> list[str]:
    """Every row of every table of the SQLite file at ``path``, read on a connection of its
    own (what another process would see)."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return list(connection.iterdump())
    finally:
        connection.close()
