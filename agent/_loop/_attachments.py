"""Attachment bytes between the store and the model: loaded for requests, stored for tools.

The log holds images and files by digest; a provider needs their bytes. Before each request the
agent hands the model the bytes of exactly the attachments that request's messages reference,
read from the store the first time and kept while later requests still reference them (an
image in the history is sent again on every step, and read once). What a tool returns inline is
stored first and its bytes kept, so the next request does not read back what was just written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from eventlog import (
    AttachmentNotFoundError,
    CorruptLogError,
    FilePart,
    ImagePart,
    Message,
    ResultPart,
    Session,
    Store,
)
from projections import surface

__all__ = ("AttachmentCache",)

_EMPTY: Mapping[str, bytes] = MappingProxyType({})


class AttachmentCache:
    """The attachment bytes of one session's requests (see the module docstring).

    :param store: where the attachments are stored; without one, requests carry no bytes
        (a provider adapter then refuses a part that references an attachment) and tool
        results keep their bytes inline.
    """

    def __init__(self, session: Session, store: Store | None) -> None:
        self.session = session
        self.store = store
        self._bytes: dict[str, bytes] = {}

    def __repr__(self) -> str:
        return f"<AttachmentCache session={self.session.id!r} cached={len(self._bytes)}>"

    async def for_request(self, messages: Sequence[Message]) -> Mapping[str, bytes]:
        """The bytes of every attachment ``messages`` reference, by digest; a digest no longer
        referenced is forgotten (after a compaction, say), so the cache holds at most what one
        request needs.

        :raises AttachmentNotFoundError: one is not stored (names the digest and the first
            surface event that references it).
        :raises CorruptLogError: one was altered (named likewise).
        """
        wanted = dict.fromkeys(d for message in messages for d in message.attachments)
        if self.store is None or not wanted:
            self._bytes = {}
            return _EMPTY
        loaded: dict[str, bytes] = {}
        for digest in wanted:
            data = self._bytes.get(digest)
            loaded[digest] = data if data is not None else await self._read(self.store, digest)
        self._bytes = loaded
        return MappingProxyType(dict(loaded))

    async def _read(self, store: Store, digest: str) -> bytes:
        try:
            return await store.get_attachment(digest)
        except (AttachmentNotFoundError, CorruptLogError) as exc:
            seq = self._referencing(digest)
            where = f"session {self.session.id!r}, seq {seq}: " if seq is not None else ""
            raise type(exc)(
                f"{where}{exc.message}; the request that needs it was not sent",
                session_id=self.session.id,
                seq=seq,
                hint=exc.hint,
            ) from exc

    def _referencing(self, digest: str) -> int | None:
        """The first model-visible event whose message references ``digest``."""
        for seq in surface(self.session):
            message = getattr(self.session.window().event(seq).data, "message", None)
            if isinstance(message, Message) and digest in message.attachments:
                return seq
        return None

    async def stored(self, content: str | tuple[ResultPart, ...]) -> str | tuple[ResultPart, ...]:
        """``content`` with each inline image or file stored as an attachment and referenced
        by digest (unchanged without a store, or with nothing inline).

        :raises StoreWriteError: an attachment could not be stored.
        """
        if self.store is None or isinstance(content, str):
            return content
        parts: list[ResultPart] = []
        for part in content:
            if isinstance(part, ImagePart | FilePart) and part.data is not None:
                part = await self._put(self.store, part)
            parts.append(part)
        return tuple(parts)

    async def _put(self, store: Store, part: ImagePart | FilePart) -> ImagePart | FilePart:
        assert part.data is not None
        digest = await store.put_attachment(part.data)
        self._bytes[digest] = part.data
        if isinstance(part, FilePart):
            return FilePart(media_type=part.media_type, attachment=digest, filename=part.filename)
        return ImagePart(media_type=part.media_type, attachment=digest)
