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

from ._errors import ValidationError
from ._strict import schema_declares_sets, schema_depth, schema_is_json_only
from ._versions import VERSION_KEY, NewerVersion, Upcaster, split_version, upcast
from ._vocabulary import CORE_TYPES, SURFACE_TYPES

__all__ = ("EventTypes", "NewerVersion", "TypeInfo")

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
        "sets",
        "surface",
        "upcasters",
        "version",
    )

    def __init__(
        self,
        name: str,
        payload: type[Any],
        *,
        surface: bool,
        ignorable: bool,
        upcasters: tuple[Upcaster, ...] = (),
    ) -> None:
        self.name = name
        self.payload = payload
        self.surface = surface
        self.ignorable = ignorable
        #: ``upcasters[k]`` turns version ``k + 1`` into ``k + 2``; the version is one more.
        self.upcasters = upcasters
        self.version = len(upcasters) + 1
        self.decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder(payload)
        # A schema of JSON types only (every core type): every leaf of a payload must be a
        # JSON value, and a JSON round trip is the whole strict check.
        schema = msgspec.inspect.type_info(payload)
        self.json_only = schema_is_json_only(schema)
        #: Whether it declares a set anywhere: else a set given is refused (it has no order).
        self.sets = schema_declares_sets(schema)
        # How deep a valid payload can nest (None: unbounded, it holds free-form JSON).
        self.max_depth = schema_depth(schema)
        #: How deep a schema of JSON types only can nest, or a number no limit allows
        #: when it is not such a schema or unbounded: an instance of it no deeper than the
        #: store's limit takes the codec's all-C validation path.
        self.fast_depth = self.max_depth if self.json_only and self.max_depth is not None else 2**31

    def decode(self, data: bytes) -> Any:
        """The payload stored as ``data``, upcast to this version.

        :raises NewerVersion: ``data`` was written as a newer version than this one.
        :raises msgspec.DecodeError: (or ``ValueError``) ``data`` does not decode.
        """
        if not data.startswith(b'{"_v":'):
            if self.upcasters:
                return upcast(data, 1, self.upcasters, self.payload)
            return self.decoder.decode(data)
        version, body = split_version(data)
        if version == self.version:
            return self.decoder.decode(body)
        if version > self.version:
            raise NewerVersion(version, self.version)
        return upcast(body, version, self.upcasters, self.payload)

    def __repr__(self) -> str:
        return f"TypeInfo({self.name!r}, {self.payload.__name__}, version {self.version})"


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

    def register_version(self, name: str, payload: type[Any], *, upcast: Upcaster) -> int:
        """Register the next version of a registered type; return its version number.

        Events of the type are written as the new version from now on; reading one written as
        an older version applies the upcasters from its version up, so it decodes as
        ``payload``. The stored bytes stay as written, so the hash chain still verifies.

        :param payload: the new payload class (a msgspec Struct, encoded as a JSON object,
            with no field named ``_v``).
        :param upcast: turns the builtins form (as decoded from JSON) of the previous version
            into the builtins form of this one.
        :raises ValidationError: the type is not registered, or ``payload`` is not usable.
        """
        old = self._types.get(name)
        if old is None:
            raise ValidationError(f"event type {name!r} is not registered; register it first")
        if (
            not (isinstance(payload, type) and issubclass(payload, msgspec.Struct))
            or getattr(payload, "__struct_config__", None) is None
            or payload.__struct_config__.array_like
        ):
            raise ValidationError(
                f"event type {name!r}: a versioned payload must be a msgspec Struct encoded as "
                f"a JSON object, not {payload!r}"
            )
        if VERSION_KEY in payload.__struct_encode_fields__:
            raise ValidationError(
                f"event type {name!r}: the field name {VERSION_KEY!r} is reserved"
            )
        try:
            info = TypeInfo(
                name,
                payload,
                surface=old.surface,
                ignorable=old.ignorable,
                upcasters=(*old.upcasters, upcast),
            )
        except (TypeError, ValueError) as exc:
            raise ValidationError(
                f"event type {name!r}: payload {payload!r} is not usable: {exc}"
            ) from exc
        self._types[name] = info
        return info.version

    def include(self, info: TypeInfo) -> None:
        """Add another registry's registration as it is (payload, versions, ignorable): how a
        reader combines the registries of several apps.

        :raises ValidationError: ``info.name`` is already registered.
        """
        if info.name in self._types:
            raise ValidationError(f"event type {info.name!r} is already registered")
        self._types[info.name] = info

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
