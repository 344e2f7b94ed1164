"""Attachments as the store hands them out: content-addressed bytes, checked on every read.

An event references an attachment by digest (``ImagePart.attachment``); the digest sits in the
event's bytes, so the hash chain covers it. The bytes live in the backend's ``attachments``
table and are read only when asked for: opening a session never touches them. Every read
re-hashes the bytes (``eventlog.stores._attachment_reads``, the one piece that talks to a
backend), so a changed attachment is caught where it is used.

Stored bytes that no longer hash to their digest are replaced by the next put of the right
bytes (:func:`replaces`), so putting them again (or importing an export that holds them)
repairs the attachment. Deleting a session removes the bytes of the attachments it referenced
that no other stored event mentions (:func:`mentioned_digests`, :func:`unmentioned`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import msgspec

from ._codec import Row, decode_event
from ._errors import ValidationError
from ._message import _DIGEST, Message, attachment_digest
from ._registry import EventTypes

__all__ = (
    "MENTION",
    "attached_digests",
    "attachment_bytes",
    "check_digest",
    "may_reference",
    "mentioned_digests",
    "referenced_digests",
    "replaces",
    "row_digests",
    "unmentioned",
)

#: Every stored reference contains this (a msgspec-encoded ``"attachment":"sha256:…"``): rows
#: without it are skipped without decoding.
_MARK = b'"attachment":"sha256:'
#: A stored reference, as the codec writes it (a key of another payload named so matches too:
#: a digest found so is only ever kept longer, never removed early).
_REFERENCE = re.compile(rb'"attachment":"(sha256:[0-9a-f]{64})"')
#: What every stored mention of a digest contains; rows without it cannot keep one alive.
MENTION = "sha256:"


def attachment_bytes(data: object) -> tuple[str, bytes]:
    """``data`` as the bytes ``put_attachment`` stores, and their digest.

    :raises ValidationError: ``data`` is not bytes, a bytearray or a memoryview.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ValidationError(
            f"put_attachment: data must be bytes (or a bytearray or memoryview), got "
            f"{type(data).__name__}"
        )
    stored = bytes(data)
    return attachment_digest(stored), stored


def check_digest(digest: object) -> str:
    """``digest``, checked to be a content address.

    :raises ValidationError: it is not ``"sha256:"`` and 64 lowercase hex digits.
    """
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise ValidationError(
            f"attachment digest must be 'sha256:' and 64 lowercase hex digits, got "
            f"{type(digest).__name__} {digest!r:.80}"
        )
    return digest


def attached_digests(messages: object) -> dict[str, None]:
    """The digests the messages reference, in order, once each (a dict as an ordered set).

    :raises ValidationError: ``messages`` is not an iterable of :class:`Message`.
    """
    if isinstance(messages, str | bytes | Message) or not isinstance(messages, Iterable):
        raise ValidationError(
            f"load_attachments: messages must be an iterable of Message, got "
            f"{type(messages).__name__}"
        )
    found: dict[str, None] = {}
    for index, message in enumerate(messages):
        if not isinstance(message, Message):
            raise ValidationError(
                f"load_attachments: item {index} must be a Message, got {type(message).__name__}"
            )
        found.update(dict.fromkeys(message.attachments))
    return found


def replaces(stored: bytes | None, digest: str, data: bytes) -> bool:
    """Whether a put of ``data`` under ``digest`` must (re)write the stored row: nothing is
    stored, or the stored bytes no longer hash to ``digest`` and ``data`` does (good bytes are
    never replaced, and bad bytes never replace anything)."""
    if stored is None:
        return True
    return attachment_digest(stored) != digest and attachment_digest(data) == digest


def mentioned_digests(datas: Iterable[bytes]) -> set[str]:
    """The digests the stored payloads ``datas`` reference (a byte search, no decoding)."""
    found: set[str] = set()
    for data in datas:
        if _MARK in data:
            found.update(m.decode() for m in _REFERENCE.findall(data))
    return found


def unmentioned(candidates: Iterable[str], datas: Iterable[bytes]) -> set[str]:
    """The ``candidates`` that no payload of ``datas`` mentions anywhere (over-cautious: a
    digest mentioned in any way keeps its bytes)."""
    left = set(candidates)
    for data in datas:
        if not left:
            break
        left.difference_update([d for d in left if d.encode() in data])
    return left


def may_reference(row: Row) -> bool:
    """Whether ``row`` may reference an attachment (a byte search, no decoding)."""
    return _MARK in row.data


def row_digests(row: Row, types: EventTypes, *, session_id: str) -> list[str]:
    """The attachment digests the event stored as ``row`` references (decoding it only when
    its bytes may hold one).

    :raises EventLogError: the row does not decode (see :func:`~eventlog.stores.decode_event`).
    """
    if not may_reference(row):
        return []
    return referenced_digests(decode_event(row, types, session_id=session_id).data)


def referenced_digests(payload: object) -> list[str]:
    """The attachment digests the messages inside ``payload`` reference, in order."""
    found: list[str] = []
    _walk(payload, found)
    return found


def _walk(value: object, found: list[str]) -> None:
    if isinstance(value, Message):
        found.extend(value.attachments)
    elif isinstance(value, msgspec.Struct):
        for name in value.__struct_fields__:
            _walk(getattr(value, name), found)
    elif isinstance(value, tuple | list):
        for item in value:
            _walk(item, found)
