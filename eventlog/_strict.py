"""Strict checks of values before they are committed: what JSON can hold and read back as given.

Every value that reaches a column or a payload passes through here at commit, whatever the
store (memory included), so a log written through ``append`` never holds something a store
cannot write or a reader cannot read back identically:

- integers fit a signed 64-bit column (SQLite ``INTEGER``, PostgreSQL ``bigint``);
- floats are finite (JSON has no NaN or infinity; msgspec would write ``null``);
- strings hold no lone surrogate (they have no UTF-8 form);
- containers nest at most ``max_nesting`` levels (default :data:`DEFAULT_MAX_NESTING`);
- leaves are JSON values: ``bytes``, ``UUID``, ``datetime``, ``Decimal``, sets and other objects
  that an encoder would silently turn into something else are refused, unless the payload's
  own schema declares such a field (an app type with a ``bytes`` field, say).

The walk is iterative: a value nested far past Python's recursion limit gets a
:class:`ValidationError` naming its path, never a ``RecursionError``. Decoding (msgspec's C
decoder counts against the recursion limit of the calling thread) goes through
:func:`on_fresh_stack` when the caller's stack is too deep, so reading never depends on it.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import math
import threading
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from ._errors import ValidationError

__all__ = (
    "DEFAULT_MAX_NESTING",
    "KEPT",
    "INT64_MAX",
    "INT64_MIN",
    "MAX_NESTING_CEILING",
    "check_int",
    "check_number",
    "check_text",
    "find_invalid",
    "first_difference",
    "has_surrogate",
    "insist_reads_back",
    "on_fresh_stack",
    "refusal",
    "schema_depth",
    "schema_is_json_only",
    "shown",
)

#: Default ceiling of container nesting in a payload or in session metadata.
DEFAULT_MAX_NESTING = 64
#: The highest ``max_nesting`` a store accepts: msgspec decodes that deep on a fresh thread.
MAX_NESTING_CEILING = 256
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

T = TypeVar("T")


def has_surrogate(text: str) -> bool:
    """True when ``text`` holds a lone surrogate (no UTF-8 encoding exists)."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def check_int(value: object, low: int = INT64_MIN, high: int = INT64_MAX) -> bool:
    """True when ``value`` is a plain ``int`` (not ``bool``) with ``low <= value <= high``."""
    return type(value) is int and low <= value <= high


def check_number(
    name: str,
    value: object,
    *,
    low: float,
    high: float = INT64_MAX,
    integer: bool = False,
) -> None:
    """Check a numeric option: an ``int`` (or, unless ``integer``, a finite ``float``), not a
    ``bool``, with ``low <= value <= high``.

    :raises ValidationError: naming the option and the accepted range.
    """
    kinds = (int,) if integer else (int, float)
    if (
        type(value) not in kinds
        or (type(value) is float and not math.isfinite(value))
        or not low <= value <= high  # type: ignore[operator]
    ):
        what = "an int" if integer else "a number"
        raise ValidationError(f"option {name} must be {what} from {low} to {high}, got {value!r}")


def check_text(value: object) -> bool:
    """True when ``value`` is a ``str`` without a lone surrogate."""
    return isinstance(value, str) and not has_surrogate(value)


def _key_path(path: str, key: str) -> str:
    return f"{path}.{key}" if key.isidentifier() else f"{path}[{key!r}]"


#: What a refusal shows of a given value at most (a huge string is not copied into a message).
_SHOWN = 60
_JSON_VALUE = "a JSON value (str, int, float, bool, None, list, dict or a Struct of them)"


def shown(value: object) -> str:
    """``value`` as a refusal message shows it: its repr, cut to a readable length (an int too
    long for ``repr`` by its number of digits)."""
    if type(value) is int and value.bit_length() > 200:
        return f"an int of {len(hex(value)) - 2} hex digits"
    try:
        text = repr(value)
    except Exception:  # a repr that fails (or nests too deep): its type says enough
        return f"a `{type(value).__name__}`"
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def refusal(expected: str, given: str, path: str) -> str:
    """A refusal in msgspec's words: ``Expected `int`, got `str` - at `$.turn` ``."""
    return f"Expected {expected}, got {given} - at `{path}`"


def find_invalid(value: Any, *, max_nesting: int, json_only: bool = True) -> str | None:
    """Why ``value`` may not be committed, or ``None`` when it may; in msgspec's words, naming
    what was expected, what was given and where (``... - at `$.message.content[0].text```).

    :param max_nesting: containers (objects, arrays, Structs) may nest this many levels.
    :param json_only: refuse leaves that are not JSON values (``False`` for a schema that
        declares such fields; msgspec's strict conversion then checks them against it).
    """
    stack: list[tuple[Any, str, int]] = [(value, "$", 0)]
    pop, push = stack.pop, stack.append
    while stack:
        item, path, depth = pop()
        kind = type(item)
        if kind is str:
            if not item.isascii() and has_surrogate(item):
                return refusal(_NO_SURROGATE, f"{shown(item)} (a lone surrogate)", path)
        elif kind is int:
            if not INT64_MIN <= item <= INT64_MAX:
                return refusal("`int` that fits 64 bits (signed)", shown(item), path)
        elif kind is float:
            if not math.isfinite(item):
                return refusal("a finite `float` (JSON has no NaN or infinity)", repr(item), path)
        elif kind is bool or item is None:
            pass
        elif kind is dict or kind is list or kind is tuple or isinstance(item, msgspec.Struct):
            if depth >= max_nesting:
                return refusal(
                    f"at most {max_nesting} levels of nesting",
                    f"`{kind.__name__}` nested deeper",
                    path,
                )
            depth += 1
            if kind is dict:
                children = []
                for key, child in item.items():
                    if type(key) is not str:
                        given = f"a key of type `{type(key).__name__}` ({shown(key)})"
                        return refusal("`str` keys", given, path)
                    if not key.isascii() and has_surrogate(key):
                        given = f"the key {shown(key)} (a lone surrogate)"
                        return refusal(f"keys of {_NO_SURROGATE}", given, path)
                    children.append((child, _key_path(path, key), depth))
            elif kind is list or kind is tuple:
                children = [(child, f"{path}[{i}]", depth) for i, child in enumerate(item)]
            else:
                children = [
                    (getattr(item, name), f"{path}.{name}", depth)
                    for name in item.__struct_fields__
                    if getattr(item, name) is not msgspec.UNSET
                ]
            for entry in reversed(children):  # reversed: the first bad path is reported first
                push(entry)
        elif isinstance(item, str | int | float):
            # Subclasses (str and int enums): checked as their base, which is what is encoded.
            base = str if isinstance(item, str) else int if isinstance(item, int) else float
            push((base(item), path, depth))
        elif json_only or not isinstance(item, _NATIVE):
            # Not JSON; and where the schema declares bytes, datetimes and the like, still
            # refused here when msgspec cannot encode it at all (it would fail with no path).
            return refusal(_JSON_VALUE, f"`{kind.__name__}`", path)
    return None


def insist_reads_back(given: Any, payload: Any) -> None:
    """:raises ValueError: ``payload`` (decoded from the JSON of ``given``) is not what
    ``given`` (builtins, :data:`KEPT` kept) says, naming where (:func:`first_difference`)."""
    back = msgspec.to_builtins(payload, builtin_types=KEPT)
    why = first_difference(given, back, field_names(type(payload)))
    if why is not None:
        raise ValueError(why)


_FIELD_NAMES: dict[type, frozenset[str]] = {}


def field_names(payload: type) -> frozenset[str]:
    """The encoded names of the fields of every Struct a payload class's schema holds (a field
    left out of ``to_builtins`` by ``omit_defaults`` is one of them, not an unknown one)."""
    names = _FIELD_NAMES.get(payload)
    if names is None:
        found: set[str] = set()
        seen: set[int] = set()
        stack = [msgspec.inspect.type_info(payload)]
        while stack:
            info = stack.pop()
            if id(info) in seen:
                continue
            seen.add(id(info))
            found.update(f.encode_name for f in getattr(info, "fields", ()))
            stack.extend(_children(info))
        names = _FIELD_NAMES[payload] = frozenset(found)
    return names


_NO_SURROGATE = "`str` without lone surrogates (they have no UTF-8 form)"


def first_difference(given: Any, back: Any, fields: frozenset[str] = frozenset()) -> str | None:
    """Where a payload's builtins (``given``) and what its JSON reads back as (``back``) first
    differ, in msgspec's words, or ``None`` when they agree. A list and a tuple are the same
    JSON array, and an object field ``given`` leaves out (a default) is no difference; an
    object field only ``given`` has is one the schema does not know, unless it is one of
    ``fields`` (a default the type omits when it writes)."""
    stack: list[tuple[Any, Any, str]] = [(given, back, "$")]
    while stack:
        mine, theirs, path = stack.pop()
        if isinstance(mine, list | tuple) and isinstance(theirs, list | tuple):
            if len(mine) != len(theirs):
                return refusal(f"an array of {len(theirs)} items", f"{len(mine)}", path)
            pairs = enumerate(zip(mine, theirs, strict=True))
            stack.extend((m, t, f"{path}[{i}]") for i, (m, t) in reversed(list(pairs)))
        elif type(mine) is dict and type(theirs) is dict:
            for key in reversed(list(mine)):
                if key not in theirs:
                    if key in fields:
                        continue  # a field at its default, which the type does not write
                    return f"Object contains unknown field `{key}` - at `{path}`"
                stack.append((mine[key], theirs[key], _key_path(path, str(key))))
        elif mine != theirs:
            kind, back_kind = type(mine).__name__, type(theirs).__name__
            if kind == back_kind:
                given = f"{shown(mine)} (it reads back as {shown(theirs)})"
                return refusal("a value that reads back as given", given, path)
            if isinstance(mine, _NATIVE):
                # Not declared there (msgspec would have converted it): it becomes JSON.
                return refusal(_JSON_VALUE, f"`{kind}` (it reads back as `{back_kind}`)", path)
            return refusal(f"`{back_kind}`", f"`{kind}` ({shown(mine)})", path)
    return None


#: Types :func:`msgspec.to_builtins` keeps as they are, so strict conversion sees them.
KEPT = (
    bytes,
    bytearray,
    memoryview,
    datetime.datetime,
    datetime.date,
    datetime.time,
    datetime.timedelta,
    uuid.UUID,
    decimal.Decimal,
)
#: The values msgspec encodes beyond JSON's, which a schema may declare (checked against the
#: schema by msgspec's strict conversion, which names the path of a mismatch).
_NATIVE = (
    *KEPT,
    set,
    frozenset,
    enum.Enum,
    msgspec.Raw,
)


_EXOTIC = (
    msgspec.inspect.BytesType,
    msgspec.inspect.ByteArrayType,
    msgspec.inspect.MemoryViewType,
    msgspec.inspect.DateTimeType,
    msgspec.inspect.DateType,
    msgspec.inspect.TimeType,
    msgspec.inspect.TimeDeltaType,
    msgspec.inspect.UUIDType,
    msgspec.inspect.DecimalType,
    msgspec.inspect.ExtType,
    msgspec.inspect.RawType,
    msgspec.inspect.CustomType,
    msgspec.inspect.EnumType,
    msgspec.inspect.SetType,
    msgspec.inspect.FrozenSetType,
)


def _children(info: msgspec.inspect.Type) -> list[msgspec.inspect.Type]:
    """The types directly inside ``info``, whatever its kind (fields, unions, containers)."""
    children: list[msgspec.inspect.Type] = [f.type for f in getattr(info, "fields", ())]
    children += getattr(info, "types", ()) + getattr(info, "item_types", ())
    children += [
        getattr(info, name)
        for name in ("item_type", "key_type", "value_type")
        if hasattr(info, name)
    ]
    return children


def schema_is_json_only(info: msgspec.inspect.Type, seen: set[int] | None = None) -> bool:
    """True when every type a schema declares is a JSON type (so every leaf must be one)."""
    seen = set() if seen is None else seen
    if id(info) in seen:
        return True
    seen.add(id(info))
    if isinstance(info, _EXOTIC):
        return False
    children = _children(info)
    return all(schema_is_json_only(child, seen) for child in children)


_CONTAINERS = (
    msgspec.inspect.StructType,
    msgspec.inspect.ListType,
    msgspec.inspect.TupleType,
    msgspec.inspect.VarTupleType,
    msgspec.inspect.DictType,
    msgspec.inspect.SetType,
    msgspec.inspect.FrozenSetType,
    msgspec.inspect.TypedDictType,
    msgspec.inspect.DataclassType,
    msgspec.inspect.NamedTupleType,
)


def schema_depth(info: msgspec.inspect.Type, seen: frozenset[int] = frozenset()) -> int | None:
    """How many containers deep a value of this schema can nest, or ``None`` when unbounded
    (a free-form ``Any`` or a recursive type)."""
    if id(info) in seen or isinstance(info, msgspec.inspect.AnyType | msgspec.inspect.CustomType):
        return None
    seen = seen | {id(info)}
    children = _children(info)
    depth = 0
    for child in children:
        found = schema_depth(child, seen)
        if found is None:
            return None
        depth = max(depth, found)
    return depth + 1 if isinstance(info, _CONTAINERS) else depth


def on_fresh_stack(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on a new thread, whose recursion budget is whole; waits for it.

    For the rare call that failed with ``RecursionError`` only because the caller's stack was
    already deep (msgspec's decoder and encoder count nesting against it).
    """
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, fn(*args)))
        except BaseException as exc:  # re-raised on the caller's thread below
            outcome.append((False, exc))

    thread = threading.Thread(target=run, name="eventlog-fresh-stack")
    thread.start()
    thread.join()
    ok, result = outcome[0]
    if not ok:
        raise result
    return result  # type: ignore[no-any-return]
