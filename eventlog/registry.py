"""The event-type registry: which payload class each type name carries.

Apps register their own types next to the core vocabulary. An ``ignorable`` type may be skipped
by a reader that does not know it; reading an unknown type that was not written as ignorable is
refused (:class:`UnsupportedFormatError`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import msgspec

from ._strict import schema_depth, schema_is_json_only
from .errors import ValidationError
from .vocabulary import CORE_TYPES, SURFACE_TYPES

__all__ = ("EventTypes", "TypeInfo")

_NAME = re.compile(r"[a-z][a-z0-9_.-]*(/[a-z0-9_.-]+)+")


class TypeInfo:
    """Everything the log needs to know about one event type (immutable once registered)."""

    __slots__ = (
        "decoder",
        "fast_depth",
        "ignorable",
        "json_only",
        "max_depth",
        "name",
        "payload",
        "surface",
    )

    def __init__(self, name: str, payload: type[Any], *, surface: bool, ignorable: bool) -> None:
        self.name = name
        self.payload = payload
        self.surface = surface
        self.ignorable = ignorable
        self.decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder(payload)
        # A schema of JSON types only (every core type): every leaf of a payload must be a
        # JSON value, and a JSON round trip is the whole strict check.
        schema = msgspec.inspect.type_info(payload)
        self.json_only = schema_is_json_only(schema)
        # How deep a valid payload can nest (None: unbounded, it holds free-form JSON).
        self.max_depth = schema_depth(schema)
        #: How deep a schema of JSON types only can nest, or a number no limit allows
        #: when it is not such a schema or unbounded: an instance of it no deeper than the
        #: store's limit takes the codec's all-C validation path.
        self.fast_depth = self.max_depth if self.json_only and self.max_depth is not None else 2**31

    def __repr__(self) -> str:
        return f"TypeInfo({self.name!r}, {self.payload.__name__})"


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
        if not isinstance(name, str) or not _NAME.fullmatch(name):
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
