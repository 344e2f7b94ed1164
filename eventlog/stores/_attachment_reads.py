"""Reading attachments back from a backend, checked: every read re-hashes the bytes, so a
changed attachment is caught where it is used, and :func:`verify_attachments` checks all those
a session references, naming the event. What an attachment is and how events reference one is
``eventlog._attachments``; this is the part that needs a :class:`Backend`.
"""

from __future__ import annotations

from collections.abc import Iterable

from .._attachments import check_digest, row_digests
from .._errors import AttachmentNotFoundError, CorruptLogError
from .._message import attachment_digest
from .._registry import EventTypes
from ._base import Backend

__all__ = ("checked_attachment", "verify_attachments", "verify_session")


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
