"""Reading a DeepSeek Harness (dsh) version-0 JSONL session log into structural records.

This module knows the dsh *envelope*: the header line, event lines and packed chunk rows, and
the implicit seq numbering. It checks structure only (JSON objects, key types, seq continuity);
what the payloads mean is :mod:`eventlog.importers._dsh_convert`'s business.

The on-disk format (dsh ``SESSION_FORMAT_VERSION = 0``):

- line 1: ``{"type": "session", "version": 0, "id", "createdAt", "cwd"?, ...}``;
- every other line: an event ``{"type", "data", "seq"?, "time"?, "surfaceOp"?,
  "sourceEventSeqs"?, "ignorable"?}`` or a packed run of stream deltas (``text-chunks``,
  ``reasoning-chunks``, ``tool-call-chunks``) that stands for as many seqs as it has members
  (entries of ``texts`` or ``args``);
- seqs count from 0 after the header. Snapshot files have ``seq`` and ``time`` stripped; when
  present they must agree with the implicit numbering.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from .._errors import UnsupportedFormatError, ValidationError
from .._strict import INT64_MAX, check_int

__all__ = (
    "DSH_FORMAT_VERSION",
    "PACKED_TYPES",
    "DshFormatError",
    "DshLog",
    "DshRecord",
    "parse_dsh",
    "read_dsh_lines",
)

#: The only dsh on-disk format version this importer reads.
DSH_FORMAT_VERSION = 0

#: Packed chunk rows and the key holding their members.
PACKED_TYPES: dict[str, str] = {
    "text-chunks": "texts",
    "reasoning-chunks": "texts",
    "tool-call-chunks": "args",
}

#: The keys of an event line (a packed row adds ``seq0`` and ``time0``).
_ENVELOPE = frozenset({"type", "data", "seq", "time", "surfaceOp", "sourceEventSeqs", "ignorable"})
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_ZSTD_SUFFIXES = (".zst", ".zstd")
_decoder = msgspec.json.Decoder()


class DshFormatError(ValidationError):
    """A dsh log is malformed; nothing was imported.

    :ivar file: the file (or ``"<lines>"``) the error is about.
    :ivar line: the 1-based line number, or ``None`` when the error is about the whole file.
    """

    def __init__(self, file: str, line: int | None, reason: str) -> None:
        where = f"{file}, line {line}" if line is not None else file
        super().__init__(f"{where}: {reason}")
        self.file = file
        self.line = line


@dataclass(frozen=True, slots=True)
class DshRecord:
    """One line after the header: an event, or a packed row standing for ``width`` seqs.

    :ivar line: the 1-based line number in the file.
    :ivar seq: the dsh seq of the event (of the first member for a packed row).
    :ivar width: how many dsh seqs the line takes (1 for an event).
    :ivar time: the event's ``time`` (``time0`` for a packed row), if the file kept it.
    :ivar surface_op: the raw ``surfaceOp`` (``"append"`` or ``{"op": "replace", ...}``).
    """

    line: int
    seq: int
    width: int
    type: str
    data: Any
    time: int | None = None
    surface_op: Any = None
    sources: tuple[int, ...] = ()
    #: Keys of the line that are not part of the dsh envelope (not imported; reported).
    unknown: tuple[str, ...] = ()

    @property
    def packed(self) -> bool:
        """True for a packed chunk row."""
        return self.type in PACKED_TYPES


@dataclass(slots=True)
class DshLog:
    """A parsed dsh log: its header and its records, in file order."""

    file: str
    header: dict[str, Any]
    records: list[DshRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def read_dsh_lines(path: str | os.PathLike[str]) -> list[str]:
    """The lines of the dsh log at ``path`` (UTF-8, newlines stripped).

    :raises UnsupportedFormatError: the file is zstd-compressed (``.jsonl.zst``/``.zstd`` or
        zstd magic bytes): eventlog does not depend on a zstandard package.
    :raises DshFormatError: the file is not UTF-8 text.
    :raises OSError: the file cannot be read.
    """
    name = os.fspath(path)
    # The whole file at once: a log is validated completely before anything is imported.
    raw = Path(name).read_bytes()
    if raw.startswith(_ZSTD_MAGIC) or name.endswith(_ZSTD_SUFFIXES):
        raise UnsupportedFormatError(
            f"{name}: zstd-compressed dsh logs (.jsonl.zst) are not supported: eventlog does "
            "not depend on a zstandard package",
            hint=f"decompress it first (`zstd -d {name}`) and import the plain .jsonl file",
        )
    try:
        # utf-8-sig: a byte-order mark an editor put at the start is not part of the log.
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DshFormatError(name, line, f"not UTF-8 text: {exc.reason}") from exc
    # Lines end at "\n" only (and "\r\n"): JSON strings may hold U+2028, U+0085 or U+001C
    # unescaped, where str.splitlines would cut the line in two.
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    return lines[:-1] if lines and lines[-1] == "" else lines


def parse_dsh(lines: Iterable[str], *, file: str = "<lines>") -> DshLog:
    """Parse a whole dsh log; every line is checked before anything is returned.

    :param lines: the log's lines (a trailing newline on each is allowed).
    :param file: the name used in error messages and the report.
    :raises UnsupportedFormatError: the header names a format version other than 0.
    :raises DshFormatError: a line is not a JSON object, the header is missing or malformed,
        an envelope field has the wrong type, or an explicit ``seq`` breaks the numbering.
    """
    log: DshLog | None = None
    next_seq = 0
    texts = list(lines)
    while texts and not texts[-1].strip():
        texts.pop()  # blank lines at the end are no records; anywhere else they are malformed
    for number, text in enumerate(texts, start=1):
        value = _decode_line(file, number, text.rstrip("\r\n"))
        if log is None:
            log = DshLog(file=file, header=_header(file, value))
            if "version" not in value:
                log.notes.append("header has no version; read as version 0")
            continue
        record = _record(file, number, next_seq, value)
        log.records.append(record)
        next_seq += record.width
    if log is None:
        raise DshFormatError(file, None, "empty log: the session header line is missing")
    return log


def _decode_line(file: str, number: int, text: str) -> dict[str, Any]:
    try:
        value = _decoder.decode(text)
    except msgspec.DecodeError as exc:
        raise DshFormatError(file, number, f"not valid JSON: {exc}") from exc
    except RecursionError:
        # Deeper than the decoder's stack reaches: far past what a commit lets a payload nest.
        raise DshFormatError(file, number, "JSON nested too deep to read") from None
    if not isinstance(value, dict):
        raise DshFormatError(file, number, f"expected a JSON object, got {_kind(value)}")
    return value


def _header(file: str, value: dict[str, Any]) -> dict[str, Any]:
    if value.get("type") != "session":
        raise DshFormatError(
            file, 1, f"expected the session header (type 'session'), got {value.get('type')!r}"
        )
    version = value.get("version", DSH_FORMAT_VERSION)
    if version != DSH_FORMAT_VERSION:
        newer = isinstance(version, int) and version > DSH_FORMAT_VERSION
        raise UnsupportedFormatError(
            f"{file}, line 1: dsh log format version {version!r} is not supported "
            f"(this importer reads version {DSH_FORMAT_VERSION})",
            hint="written by a newer harness" if newer else None,
        )
    if not isinstance(value.get("id"), str):
        raise DshFormatError(file, 1, "the session header has no string 'id'")
    created = value.get("createdAt")
    if not check_int(created, 0, INT64_MAX):
        raise DshFormatError(
            file, 1, "the session header has no 'createdAt' in epoch milliseconds (64 bits)"
        )
    return value


def _record(file: str, number: int, next_seq: int, value: dict[str, Any]) -> DshRecord:
    type_ = value.get("type")
    if not isinstance(type_, str) or not type_:
        raise DshFormatError(file, number, "the event has no string 'type'")
    if "data" not in value:
        raise DshFormatError(file, number, f"the {type_!r} event has no 'data'")
    data = value["data"]
    if type_ in PACKED_TYPES:
        return _packed(file, number, next_seq, type_, value, data)
    unknown = tuple(sorted(value.keys() - _ENVELOPE))
    _check_seq(file, number, next_seq, value.get("seq"), "seq")
    return DshRecord(
        line=number,
        seq=next_seq,
        width=1,
        type=type_,
        data=data,
        time=_time(file, number, value.get("time"), "time"),
        surface_op=_surface_op(file, number, value.get("surfaceOp")),
        sources=_sources(file, number, value.get("sourceEventSeqs")),
        unknown=unknown,
    )


def _packed(
    file: str, number: int, next_seq: int, type_: str, value: dict[str, Any], data: Any
) -> DshRecord:
    members = data.get(PACKED_TYPES[type_]) if isinstance(data, dict) else None
    if not isinstance(members, list) or not members:
        raise DshFormatError(
            file, number, f"packed row {type_!r} has no list '{PACKED_TYPES[type_]}' of members"
        )
    _check_seq(file, number, next_seq, value.get("seq0", data.get("seq0")), "seq0")
    time0 = value.get("time0", data.get("time0"))
    unknown = tuple(sorted(value.keys() - _ENVELOPE - {"seq0", "time0"}))
    return DshRecord(
        line=number,
        seq=next_seq,
        width=len(members),
        type=type_,
        data=data,
        time=_time(file, number, time0, "time0"),
        unknown=unknown,
    )


def _check_seq(file: str, number: int, expected: int, seq: Any, key: str) -> None:
    if seq is not None and seq != expected:
        raise DshFormatError(
            file, number, f"'{key}' is {seq!r} but the event is number {expected} in the log"
        )


def _time(file: str, number: int, value: Any, key: str) -> int | None:
    if value is None:
        return None
    if not check_int(value, 0, INT64_MAX):  # what a commit takes as a time
        raise DshFormatError(file, number, f"'{key}' {value!r} is not epoch milliseconds")
    return int(value)


def _surface_op(file: str, number: int, op: Any) -> Any:
    if op is None or op == "append":
        return op
    if (
        isinstance(op, dict)
        and op.get("op") == "replace"
        and _is_int(op.get("start"))
        and _is_int(op.get("end"))
    ):
        return op
    raise DshFormatError(file, number, f"'surfaceOp' {op!r} is neither 'append' nor a replace")


def _sources(file: str, number: int, sources: Any) -> tuple[int, ...]:
    # Provenance naming no earlier event is not fatal (some snapshots were edited by hand):
    # the importer drops such sources and notes it.
    if sources is None:
        return ()
    if not isinstance(sources, list) or not all(_is_int(s) for s in sources):
        raise DshFormatError(file, number, "'sourceEventSeqs' is not a list of integers")
    return tuple(sources)


def _is_int(value: Any) -> bool:
    return type(value) is int


def _kind(value: Any) -> str:
    return {list: "an array", str: "a string", type(None): "null"}.get(type(value), "a scalar")
