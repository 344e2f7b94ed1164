"""The event-type registry: which payload class each type name carries.

Apps register their own types next to the core vocabulary. An ``ignorable`` type may be skipped
by a reader that does not know it; reading an unknown type that was not written as ignorable is
refused (:class:`UnsupportedFormatError`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

import msgspec

from .errors import ValidationError
from .vocabulary import CORE_TYPES, SURFACE_TYPES

__all__ = ("EventTypes", "TypeInfo")

_NAME = re.compile(r"^[a-z][a-z0-9_.-]*(/[a-z0-9_.-]+)+$")


class TypeInfo:
    """Everything the log needs to know about one event type (immutable once registered)."""

    __slots__ = ("decoder", "ignorable", "may_hold_float", "name", "payload", "surface")

    def __init__(self, name: str, payload: type[Any], *, surface: bool, ignorable: bool) -> None:
        self.name = name
        self.payload = payload
        self.surface = surface
        self.ignorable = ignorable
        self.decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder(payload)
        # Only payloads that can hold a float need the (slower) non-finite scan at commit.
        self.may_hold_float = _may_hold_float(msgspec.inspect.type_info(payload))

    def __repr__(self) -> str:
        return f"TypeInfo({self.name!r}, {self.payload.__name__})"


def _may_hold_float(info: msgspec.inspect.Type, seen: set[int] | None = None) -> bool:
    seen = set() if seen is None else seen
    if id(info) in seen:
        return False
    seen.add(id(info))
    if isinstance(info, msgspec.inspect.FloatType | msgspec.inspect.AnyType):
        return True
    if isinstance(info, msgspec.inspect.CustomType):
        return True  # unknown to msgspec: be safe and scan
    # Walk every nested type whatever its kind (struct fields, unions, containers).
    children: list[msgspec.inspect.Type] = [f.type for f in getattr(info, "fields", ())]
    children += getattr(info, "types", ()) + getattr(info, "item_types", ())
    children += [
        getattr(info, name)
        for name in ("item_type", "key_type", "value_type")
        if hasattr(info, name)
    ]
    return any(_may_hold_float(child, seen) for child in children)


def find_non_finite(value: Any, path: str = "$") -> str | None:
    """The path of the first NaN or infinity inside ``value`` (builtins form), or ``None``."""
    if isinstance(value, float):
        return None if math.isfinite(value) else path
    if isinstance(value, dict):
        for key, item in value.items():
            found = find_non_finite(item, f"{path}.{key}")
            if found:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = find_non_finite(item, f"{path}[{index}]")
            if found:
                return found
    return None


class EventTypes:
    """A registry of event types. ``EventTypes()`` starts with the core vocabulary.

    >>> types = EventTypes()
    >>> types.register("app/note", Note, ignorable=True)
    """

    def __init__(self, *, core: bool = True) -> None:
        self._types: dict[str, TypeInfo] = {}
        if core:
            for name, payload in CORE_TYPES.items():
                self._types[name] = TypeInfo(
                    name, payload, surface=name in SURFACE_TYPES, ignorable=False
                )

    def register(self, name: str, payload: type[Any], *, ignorable: bool = False) -> None:
        """Register an app type.

        :param name: a namespaced name such as ``"app/note"`` (lowercase, ``/``-separated).
        :param payload: a msgspec Struct (preferably ``frozen=True``) describing ``data``.
        :param ignorable: readers that do not know this type may skip it.
        :raises ValidationError: the name is malformed, already registered, or the payload
            type cannot be used by msgspec.
        """
        if not _NAME.match(name):
            raise ValidationError(
                f"event type name {name!r} is not namespaced like 'app/thing' "
                "(lowercase letters, digits, '_', '-', '.', separated by '/')"
            )
        if name in self._types:
            raise ValidationError(f"event type {name!r} is already registered")
        try:
            info = TypeInfo(name, payload, surface=False, ignorable=ignorable)
        except (TypeError, ValueError) as exc:
            raise ValidationError(
                f"event type {name!r}: payload {payload!r} is not usable: {exc}"
            ) from exc
        self._types[name] = info

    def get(self, name: str) -> TypeInfo | None:
        """The registration of ``name``, or ``None``."""
        return self._types.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._types

    def __iter__(self) -> Iterator[str]:
        return iter(self._types)

    def __len__(self) -> int:
        return len(self._types)

    def copy(self) -> EventTypes:
        """An independent registry with the same registrations."""
        clone = EventTypes(core=False)
        clone._types = dict(self._types)
        return clone

    def __repr__(self) -> str:
        return f"EventTypes({len(self._types)} types)"
