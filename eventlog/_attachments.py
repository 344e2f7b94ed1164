"""Attachments as the store hands them out: content-addressed bytes, checked on every read.

An event references an attachment by digest (``ImagePart.attachment``); the digest sits in the
event's bytes, so the hash chain covers it. The bytes live in the backend's ``attachments``
table and are read only when asked for: opening a session never touches them. Every read
re-hashes the bytes, so a changed attachment is caught where it is used, and
:func:`verify_attachments` checks all those a session references, naming the event.

Stored bytes that no longer hash to their digest are replaced by the next put of the right
bytes (:func:`replaces`), so putting them again (or importing an export that holds them)
repairs the attachment. Deleting a session removes the bytes of the attachments it referenced
that no other stored event mentions (:func:`mentioned_digests`, :func:`unmentioned`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

import msgspec

from ._codec import Row, decode_event
from ._errors import AttachmentNotFoundError, CorruptLogError, ValidationError
from ._message import _DIGEST, Message, attachment_digest
from ._registry import EventTypes

if TYPE_CHECKING:
    from .stores import Backend

__all__ = (
    "MENTION",
    "attached_digests",
    "attachment_bytes",
    "check_digest",
    "checked_attachment",
    "may_reference",
    "mentioned_digests",
    "referenced_digests",
    "replaces",
    "row_digests",
    "unmentioned",
    "verify_attachments",
    "verify_session",
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


async def checked_attachment(
    backend: Backend, digest: str, *, session_id: str | None = None, seq: int | None = None
) -> bytes:
    """The bytes stored under ``digest``, after checking they hash to it.

    :raises ValidationError: ``digest`` is not a content address.
    :raises AttachmentNotFoundError: nothing is stored under ``digest``.
    :raises CorruptLogError: the stored bytes do not hash to ``digest`` (names the event
        ``seq`` that references it, when given).
    """
    where = "" if seq is None else f"session {session_id!r}, seq {seq}: "
    check_digest(digest)
    data = await backend.get_attachment(digest)
    if data is None:
        raise AttachmentNotFoundError(
            f"{where}attachment {digest} is not stored",
            session_id=session_id,
            seq=seq,
            hint="store its bytes with store.put_attachment",
        )
    if attachment_digest(data) != digest:
        raise CorruptLogError(
            f"{where}attachment {digest} was altered: its stored bytes hash to "
            f"{attachment_digest(data)}",
            session_id=session_id,
            seq=seq,
            hint="store the right bytes again (store.put_attachment): they replace the "
            "altered ones",
        )
    return data


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


async def verify_attachments(
    backend: Backend, session_id: str, rows: Iterable[tuple[int, Iterable[str]]]
) -> int:
    """Check every attachment each ``(seq, digests)`` references; return how many were checked.

    :raises AttachmentNotFoundError: one is missing (names the first event referencing it).
    :raises CorruptLogError: one was altered (names the first event referencing it).
    """
    checked: set[str] = set()
    for seq, digests in rows:
        for digest in digests:
            if digest not in checked:
                await checked_attachment(backend, digest, session_id=session_id, seq=seq)
                checked.add(digest)
    return len(checked)


async def verify_session(backend: Backend, types: EventTypes, session_id: str) -> int:
    """:func:`verify_attachments` of every attachment the stored events of ``session_id``
    reference (see :meth:`~eventlog.stores.Store.verify_attachments`)."""
    references: list[tuple[int, list[str]]] = []
    async for chunk in backend.read_rows(session_id, 0, None):
        references.extend(
            (row.seq, row_digests(row, types, session_id=session_id)) for row in chunk
        )
    return await verify_attachments(backend, session_id, references)
