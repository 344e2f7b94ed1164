"""The export format: one JSON object per line, a session header then its events.

Lossless by construction: each event line carries every stored column — seq, type, time, the
surface and sources columns exactly as stored, the ignorable flag, the chain hash, and the
payload's JSON bytes verbatim (embedded as raw JSON, so an extension event whose type this
process does not know round-trips byte for byte). Import recomputes the hash chain over those
bytes, so a file edited after export is refused. Several exports concatenated form a valid
file of several sessions.

``{"kind": "session", "id": …, "created_at": …, "parent_id": …, "fork_seq": …,
"metadata": {…}, "head": N, "format": 2}`` (the session's record, :class:`SessionRecord`),
then N+1 lines ``{"kind": "event", "seq": …, "type": …, "time": …,
"surface": null | "append" | "replace:START:END", "sources": […], "ignorable": …,
"hash": "hex", "data": {…}}``. A payload that is not one line of valid JSON (only a damaged
row) is carried as ``"data_b64"`` (``"data"`` is then ``null``). Format 2 adds, after a
session's events, one ``{"kind": "attachment", "digest": "sha256:…", "data_b64": "…"}`` line per
attachment its events reference; import checks each against its digest.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import msgspec

from eventlog import attachment_digest
from eventlog.stores import Row, SessionRecord

from ..report import counted

__all__ = (
    "EXPORT_FORMAT",
    "AttachmentLine",
    "EventLine",
    "ExportedSession",
    "FormatError",
    "SessionLine",
    "attachment_line",
    "event_line",
    "parse_lines",
    "session_line",
)

#: Version of the export format; a newer one is refused. 2: attachment lines.
EXPORT_FORMAT = 2


class SessionLine(SessionRecord, frozen=True, kw_only=True, tag_field="kind", tag="session"):
    """The header of one session in an export: the session's record (its head required) and
    the export format's version."""

    format: int
    head: int


class EventLine(msgspec.Struct, kw_only=True, tag_field="kind", tag="event", omit_defaults=True):
    """One stored event, every column of its row."""

    seq: int
    type: str
    time: int
    surface: str | None
    sources: msgspec.Raw
    ignorable: bool
    hash: str
    data: msgspec.Raw
    data_b64: str | None = None


class AttachmentLine(msgspec.Struct, kw_only=True, tag_field="kind", tag="attachment"):
    """One attachment a session's events reference: its digest and bytes."""

    digest: str
    data_b64: str


_NULL = msgspec.Raw(b"null")
_encoder = msgspec.json.Encoder()
_decoder: msgspec.json.Decoder[SessionLine | EventLine | AttachmentLine] = msgspec.json.Decoder(
    SessionLine | EventLine | AttachmentLine
)


def attachment_line(digest: str, data: bytes) -> bytes:
    """The line of one attachment (no newline)."""
    return _encoder.encode(AttachmentLine(digest=digest, data_b64=base64.b64encode(data).decode()))


class FormatError(ValueError):
    """A line of an export file is malformed; the message names the line."""


def session_line(record: SessionRecord) -> bytes:
    """The header line of ``record`` (no newline)."""
    return _encoder.encode(SessionLine(format=EXPORT_FORMAT, **msgspec.structs.asdict(record)))


def event_line(row: Row) -> bytes:
    """The line of one stored row (no newline)."""
    data, data_b64 = msgspec.Raw(row.data), None
    if not _is_one_line_json(row.data):
        data, data_b64 = _NULL, base64.b64encode(row.data).decode()
    return _encoder.encode(
        EventLine(
            seq=row.seq,
            type=row.type,
            time=row.time,
            surface=row.surface,
            sources=msgspec.Raw(row.sources.encode()),
            ignorable=row.ignorable,
            hash=row.hash.hex(),
            data=data,
            data_b64=data_b64,
        )
    )


def _is_one_line_json(data: bytes) -> bool:
    if b"\n" in data or b"\r" in data:
        return False
    try:
        msgspec.json.decode(data)
    except msgspec.DecodeError:
        return False
    return True


@dataclass
class ExportedSession:
    """One session read back from an export: its record and rows, and where it started
    (``file`` and ``line``; ``lines[seq]`` is the line of event ``seq``)."""

    record: SessionRecord
    line: int
    file: str = ""
    rows: list[Row] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    attachments: dict[str, bytes] = field(default_factory=dict)


def parse_lines(lines: Iterable[bytes], name: str) -> Iterator[ExportedSession]:
    """The sessions of an export file, each complete and with contiguous seqs.

    :raises FormatError: naming ``name`` and the line number.
    """
    current: ExportedSession | None = None
    number = 0
    for number, text in enumerate(lines, 1):
        if number == 1:
            text = text.removeprefix(_BOM)  # an editor's byte-order mark is not a line's
        if not text.strip():
            continue
        item = _decode(text, name, number)
        if isinstance(item, SessionLine):
            if current is not None:
                yield _complete(current, name)
            current = ExportedSession(_record(item, name, number), number, name)
            continue
        if current is None:
            raise FormatError(f"{name}:{number}: an event line before any session line")
        if isinstance(item, AttachmentLine):
            current.attachments[item.digest] = _attachment(item, name, number)
            continue
        expected = len(current.rows)
        if item.seq != expected:
            raise FormatError(
                f"{name}:{number}: field `seq`: session {current.record.id!r}: expected seq "
                f"{expected}, found {item.seq}"
            )
        current.rows.append(_row(item, name, number))
        current.lines.append(number)
    if current is None:
        raise FormatError(f"{name}: no session in the file")
    yield _complete(current, name)


def _attachment(item: AttachmentLine, name: str, number: int) -> bytes:
    try:
        data = base64.b64decode(item.data_b64, validate=True)
    except ValueError as exc:
        raise FormatError(f"{name}:{number}: attachment {item.digest}: {exc}") from None
    if attachment_digest(data) != item.digest:
        raise FormatError(
            f"{name}:{number}: attachment {item.digest}: its bytes hash to "
            f"{attachment_digest(data)}; the file was altered"
        )
    return data


def _decode(text: bytes, name: str, number: int) -> SessionLine | EventLine | AttachmentLine:
    try:
        return _decoder.decode(text)
    except msgspec.DecodeError as exc:
        found = _FIELD.search(str(exc))
        field = "" if found is None else f"field `{found[1] or found[2]}`: "
        raise FormatError(f"{name}:{number}: {field}not an eventlog export line: {exc}") from None
    except RecursionError:
        # Deeper than the decoder's stack reaches: far past what a commit lets a payload or
        # metadata nest (at most 256 levels).
        raise FormatError(
            f"{name}:{number}: not an eventlog export line: JSON nested too deep to read"
        ) from None


_BOM = "\ufeff".encode()

#: The field msgspec names in a validation error: ``at `$.time``` or a missing field.
_FIELD = re.compile(r"at `\$\.(\w+)|missing required field `(\w+)`")


def _record(item: SessionLine, name: str, number: int) -> SessionRecord:
    if item.format > EXPORT_FORMAT:
        raise FormatError(
            f"{name}:{number}: export format {item.format} is newer than this eventlog "
            f"reads ({EXPORT_FORMAT}); upgrade eventlog"
        )
    return SessionRecord(**{name: getattr(item, name) for name in SessionRecord.__struct_fields__})


def _row(item: EventLine, name: str, number: int) -> Row:
    field = "hash"
    try:
        digest = bytes.fromhex(item.hash)
        field = "data_b64"
        if item.data_b64 is None:
            data = bytes(item.data)
        else:
            data = base64.b64decode(item.data_b64, validate=True)
    except ValueError as exc:
        raise FormatError(f"{name}:{number}: seq {item.seq}: field `{field}`: {exc}") from None
    sources = bytes(item.sources).decode()
    return Row(item.seq, item.type, item.time, item.surface, sources, item.ignorable, data, digest)


def _complete(session: ExportedSession, name: str) -> ExportedSession:
    count = len(session.rows)
    number = session.lines[-1] if session.lines else session.line
    if count != session.record.head + 1:
        raise FormatError(
            f"{name}:{number}: session {session.record.id!r} ends after "
            f"{counted(count, 'event')}, its "
            f"header (line {session.line}) promises {session.record.head + 1}; the file is cut"
        )
    return session
