"""Payload versions in the stored bytes, and the upcasters that bring old versions up to date.

A payload type starts at version 1; registering version ``n + 1`` takes an *upcaster* from
version ``n`` (a function from the builtins form of a version ``n`` payload, as decoded from
JSON, to the builtins form of version ``n + 1``). A payload of version 1 is stored as the bare
JSON object, as it always was; a later version is stored with its version as the object's first
key, ``{"_v":2,...}``, so ``json_extract`` still reads every field. Reading applies the
upcasters from the stored version to the registered one; the hash chain is over the stored
bytes, which upcasting never changes. A stored version newer than the registered one is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

__all__ = (
    "NewerVersion",
    "Upcaster",
    "VERSION_KEY",
    "mark_version",
    "split_version",
    "upcast",
)

#: The key a stored payload of version 2 or later opens with; no payload field may use it.
VERSION_KEY = "_v"
_PREFIX = b'{"_v":'
_builtins = msgspec.json.Decoder()

#: A function from the builtins form of version ``n`` to that of version ``n + 1``.
Upcaster = Callable[[Any], Any]


class NewerVersion(Exception):
    """The stored payload's version is newer than the registered one (``str`` says which)."""

    def __init__(self, stored: int, known: int) -> None:
        super().__init__(f"stored version {stored}, registered up to version {known}")
        self.stored = stored
        self.known = known


def mark_version(raw: bytes, version: int) -> bytes:
    """The stored bytes of the JSON object ``raw`` written as ``version``."""
    if version == 1:
        return raw
    if raw == b"{}":
        return b'{"_v":%d}' % version
    return b'{"_v":%d,' % version + raw[1:]


def split_version(data: bytes) -> tuple[int, bytes]:
    """The version of stored payload bytes and the payload's JSON without the version key.

    :raises ValueError: the version key is malformed.
    """
    if not data.startswith(_PREFIX):
        return 1, data
    end = len(_PREFIX)
    while end < len(data) and data[end] not in b",}":
        end += 1
    version = int(data[len(_PREFIX) : end])
    if version < 2 or end == len(data):
        raise ValueError(f"malformed payload version {data[: end + 1]!r}")
    body = b"{" + data[end + 1 :] if data[end : end + 1] == b"," else b"{}"
    return version, body


def upcast(body: bytes, stored: int, upcasters: tuple[Upcaster, ...], payload: type[Any]) -> Any:
    """Decode ``body`` (written as version ``stored``) as the latest ``payload``.

    ``upcasters[k]`` turns version ``k + 1`` into ``k + 2``.

    :raises ValueError: an upcaster failed (says which), or its result does not fit
        ``payload`` (a ``msgspec.ValidationError``).
    """
    value = _builtins.decode(body)
    for index in range(stored - 1, len(upcasters)):
        try:
            value = upcasters[index](value)
        except Exception as exc:
            raise ValueError(
                f"the upcaster from version {index + 1} to {index + 2} failed: {exc!r}"
            ) from exc
    return msgspec.convert(value, payload)
