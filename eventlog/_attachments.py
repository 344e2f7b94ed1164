"""Attachments as the store hands them out: content-addressed bytes, checked on every read.

An event references an attachment by digest (``ImagePart.attachment``); the digest sits in the
event's bytes, so the hash chain covers it. The bytes live in the backend's ``attachments``
table and are read only when asked for: opening a session never touches them. Every read
re-hashes the bytes, so a changed attachment is caught where it is used, and
:func:`verify_attachments` checks all those a session references, naming the event.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import msgspec

from ._codec import Row, decode_event
from ._errors import AttachmentNotFoundError, CorruptLogError
from ._message import Message, attachment_digest
from ._registry import EventTypes

if TYPE_CHECKING:
    from .stores import Backend

__all__ = (
    "checked_attachment",
    "may_reference",
    "referenced_digests",
    "row_digests",
    "verify_attachments",
)

#: Every stored reference contains this (a msgspec-encoded ``"attachment":"sha256:…"``): rows
#: without it are skipped without decoding.
_MARK = b'"attachment":"sha256:'


async def checked_attachment(
    backend: Backend, digest: str, *, session_id: str | None = None, seq: int | None = None
) -> bytes:
    """The bytes stored under ``digest``, after checking they hash to it.

    :raises AttachmentNotFoundError: nothing is stored under ``digest``.
    :raises CorruptLogError: the stored bytes do not hash to ``digest`` (names the event
        ``seq`` that references it, when given).
    """
    where = "" if seq is None else f"session {session_id!r}, seq {seq}: "
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
            hint="restore the attachment's bytes from a backup or an export",
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
