"""The codec: typed events to stored rows (envelope columns and bytes) and back.

One long-lived encoder serves every type; each type has its own decoder (held by its
:class:`TypeInfo`). Stores only ever see :class:`Row`. The row's ``hash`` chains every event to
the one before it, in one of two chain formats, recorded per session by the form of its hashes:

- format 1 (sessions written before format 2): the 32-byte
  ``blake2b(prev_hash ‖ seq ‖ type ‖ envelope ‖ data)``. It does not bind the session id: an
  event copied from another format-1 session at the same seq, with the same predecessor,
  verifies (a known limit of those logs; they keep opening under this rule);
- format 2 (every session created or forked since): the byte ``0x02`` followed by the 32-byte
  ``blake2b("eventlog chain 2" ‖ session id ‖ prev_hash ‖ seq ‖ type ‖ envelope ‖ data)``, so
  an event verifies only in the session it was written to.

A session's format is the format of its event 0; every event of a session has the same format,
so a row of the other format inside a chain is reported as damage at its seq. A fork re-chains
the copied events under the child's id (format 2), whatever the parent's format: the child's
chain is its own, and it points to its parent through ``parent_id``, ``fork_seq`` and its
``session/forked`` event.
"""

from __future__ import annotations

from hashlib import blake2b as _blake2b
from typing import Any

import msgspec

from ._errors import CorruptLogError, UnsupportedFormatError, ValidationError
from ._event import APPEND, Event, Replace, SurfaceOp, Unknown
from ._registry import EventTypes, NewerVersion, TypeInfo
from ._strict import (
    _EXOTIC,
    DEFAULT_MAX_NESTING,
    INT64_MAX,
    INT64_MIN,
    KEPT,
    _children,
    find_invalid,
    insist_reads_back,
    on_fresh_stack,
    refusal,
)
from ._versions import mark_version, split_version

__all__ = (
    "CHAIN_VERSION",
    "FORMAT_VERSION",
    "GENESIS_HASH",
    "Row",
    "chain_hash",
    "chain_version_of",
    "decode_event",
    "encode_payload",
    "encode_sources",
    "encode_surface",
    "make_row",
    "make_rows",
    "rechain",
    "stored_version",
    "verify_rows",
    "decode_surface",
)

#: Version of the database layout (tables and columns; ``meta.format_version``). The hash-chain
#: format is versioned per session (:data:`CHAIN_VERSION`).
FORMAT_VERSION = 1
#: The chain format new sessions are written with.
CHAIN_VERSION = 2
#: The ``prev_hash`` of event 0.
GENESIS_HASH = b""
_V2_PREFIX = b"\x02"
_V2_DOMAIN = b"eventlog chain 2\x1f"

_encoder = msgspec.json.Encoder()
_sources_decoder = msgspec.json.Decoder(tuple[int, ...])


class Row(msgspec.Struct, frozen=True, array_like=True):
    """One stored event as stores see it: envelope columns and the payload's JSON bytes."""

    seq: int
    type: str
    time: int
    surface: str | None
    sources: str
    ignorable: bool
    data: bytes
    hash: bytes


def encode_payload(
    info: TypeInfo,
    data: Any,
    *,
    session_id: str,
    seq: int,
    max_nesting: int = DEFAULT_MAX_NESTING,
) -> tuple[Any, bytes]:
    """Validate ``data`` against ``info`` strictly and encode it.

    ``data`` is an instance of the payload class or a dict of its fields; both are held to the
    same rules: the value must read back from its bytes exactly as given (no ``bytes``,
    ``UUID``, ``datetime`` or ``Decimal`` where the schema declares ``str``, no field the type
    does not have in a dict; see :mod:`eventlog._strict` for the whole list). A list and a tuple
    are the same JSON array: either is accepted where the schema declares the other, and the
    payload returned holds the declared one.

    Returns a fresh, validated payload instance (decoded from the bytes, so the caller's object
    is never shared) and the stored bytes: the JSON, marked with the type's version when it is
    past 1 (see :mod:`eventlog._versions`).

    :raises ValidationError: wrong payload class, a field of the wrong type, NaN or infinity,
        an integer beyond 64 bits, a lone surrogate, nesting deeper than ``max_nesting``;
        the message says what was expected, what was given and where, in msgspec's words
        (``Expected `int`, got `str` - at `$.turn```).
    """
    if type(data) is not info.payload:
        if isinstance(data, msgspec.Struct) or not isinstance(data, dict):
            also = "" if isinstance(data, msgspec.Struct) else " or a dict of its fields"
            given = f"`{type(data).__name__}`"
            raise _invalid(
                info, session_id, seq, refusal(f"`{info.payload.__name__}`{also}", given, "$")
            )
    try:
        bounded = info.fast_depth <= max_nesting
        if type(data) is info.payload and (
            bounded or _EXACT_ROUND_TRIP.get(info.payload) or _round_trip_exact(info)
        ):
            # The common case (an instance of a schema of JSON types, and maybe bytes, that
            # does not nest too deep), all in msgspec's C code: encode, decode, and the result
            # must equal what was given (a bytes, UUID, datetime or Decimal where a str is
            # declared would read back as a str and differ); no integer of 19 digits or more
            # (maybe beyond 64 bits). A lone surrogate fails the encoding, NaN the decoding.
            # Not too deep: the schema cannot nest past the limit, or (free-form JSON) the
            # bytes open no more brackets than the limit: each level opens one, and brackets
            # inside strings only overcount.
            try:
                raw = _encoder.encode(data)
                depth = info.max_depth
                if (
                    bounded
                    or (depth is not None and depth <= max_nesting)
                    or raw.count(b"{") + raw.count(b"[") <= max_nesting
                ) and _NINETEEN_DIGITS not in raw.translate(_DIGITS_AS_NINE):
                    payload = info.decoder.decode(raw)
                    if payload == data:
                        return payload, raw if info.version == 1 else mark_version(
                            raw, info.version
                        )
            except (msgspec.MsgspecError, TypeError, ValueError, OverflowError, RecursionError):
                pass  # the walk below explains it (or a deep caller stack: it passes)
        # Explain (or, for a schema with bytes, datetimes ..., check) with the slower walk.
        invalid = find_invalid(data, max_nesting=max_nesting, json_only=info.json_only)
        if invalid is not None:
            raise _invalid(info, session_id, seq, invalid)
        try:
            return _encode_checked(info, data)
        except RecursionError:
            # Nesting is bounded (checked above), so only a deep caller stack gets here.
            return on_fresh_stack(_encode_checked, info, data)
    except ValidationError:
        raise  # already names the place (it is a ValueError too: not to be wrapped again)
    except (msgspec.MsgspecError, TypeError, ValueError, OverflowError, RecursionError) as exc:
        raise _invalid(info, session_id, seq, str(exc)) from exc


#: Per payload class: whether a JSON round trip that gives back an equal value is the whole
#: strict check (see :func:`_only_bytes_beyond_json`).
_EXACT_ROUND_TRIP: dict[type, bool] = {}


def _round_trip_exact(info: TypeInfo) -> bool:
    exact = _EXACT_ROUND_TRIP.get(info.payload)
    if exact is None:
        schema = msgspec.inspect.type_info(info.payload)
        exact = _EXACT_ROUND_TRIP[info.payload] = _only_bytes_beyond_json(schema, set())
    return exact


def _only_bytes_beyond_json(schema: msgspec.inspect.Type, seen: set[int]) -> bool:
    """Whether ``schema`` declares JSON types and ``bytes`` only, every dict keyed by ``str``:
    then a value that reads back equal from its JSON (within the nesting and integer limits)
    is one the strict walk accepts too. A ``bytes`` value reads back equal only where bytes are
    declared (elsewhere it reads back as a base64 ``str``); any other non-JSON value, or a key
    that is not a ``str``, reads back different or is declared, which this refuses."""
    if id(schema) in seen:
        return True
    seen.add(id(schema))
    if isinstance(schema, msgspec.inspect.BytesType):
        return True
    if isinstance(schema, _EXOTIC):
        return False
    if isinstance(schema, msgspec.inspect.DictType) and not isinstance(
        schema.key_type, msgspec.inspect.StrType
    ):
        return False
    return all(_only_bytes_beyond_json(child, seen) for child in _children(schema))


#: 19 digits in a row in the JSON bytes: an integer that may not fit 64 bits (floats are
#: written with at most 17 significant digits); a string with that many digits is checked too.
_DIGITS_AS_NINE = bytes.maketrans(b"0123456789", b"9999999999")
_NINETEEN_DIGITS = b"9" * 19


def _encode_checked(info: TypeInfo, data: Any) -> tuple[Any, bytes]:
    if info.json_only:
        # Every leaf is a JSON value (checked): decoding the bytes is the strict check, the
        # same for an instance and a dict; a dict must also name only fields the type has
        # (decoding drops the others silently: a misspelt field would be lost).
        raw = _encoder.encode(data)
        payload = info.decoder.decode(raw)
        if type(data) is dict:
            insist_reads_back(data, payload)
        return payload, mark_version(raw, info.version)
    # A schema with bytes, datetimes, ...: convert strictly from builtins, so an instance is
    # held to exactly what a dict is, then insist the result reads back as given (a list
    # where a tuple is declared is the same JSON: it reads back as the tuple).
    given = msgspec.to_builtins(data, builtin_types=KEPT)
    built = msgspec.convert(given, info.payload)
    raw = _encoder.encode(built)
    payload = info.decoder.decode(raw)
    insist_reads_back(given, payload)
    return payload, mark_version(raw, info.version)


def _invalid(info: TypeInfo, session_id: str, seq: int, why: str) -> ValidationError:
    return ValidationError(
        f"session {session_id!r}, seq {seq}, type {info.name!r}: {why}",
        session_id=session_id,
        seq=seq,
    )


def encode_surface(op: SurfaceOp | None) -> str | None:
    """The surface column: ``None``, ``"append"`` or ``"replace:START:END"``."""
    if op is None:
        return None
    if isinstance(op, Replace):
        return f"replace:{op.start}:{op.end}"
    return "append"


def decode_surface(text: str | None) -> SurfaceOp | None:
    """Inverse of :func:`encode_surface`; raises ``ValueError`` on anything else."""
    if text is None:
        return None
    if text == "append":
        return APPEND
    kind, start, end = text.split(":")
    if kind != "replace":
        raise ValueError(f"unknown surface operation {text!r}")
    return Replace(int(start), int(end))


def encode_sources(sources: tuple[int, ...]) -> str:
    """The sources column: a JSON array of seqs."""
    return "[" + ",".join(map(str, sources)) + "]" if sources else "[]"


def chain_hash(
    prev: bytes,
    seq: int,
    type_: str,
    time: int,
    surface: str | None,
    sources: str,
    ignorable: bool,
    data: bytes,
    session_id: str | None = None,
) -> bytes:
    """The hash of one event given the hash of the one before it; format 2 (33 bytes, binding
    ``session_id``) when ``session_id`` is given, else format 1 (32 bytes):
    ``blake2b(["eventlog chain 2␟" ‖ session_id ‖ "␟" ‖] prev ‖
    "seq␟type␟time␟surface␟sources␟ignorable␟" ‖ data)``."""
    head = f"{seq}\x1f{type_}\x1f{time}\x1f{surface or ''}\x1f{sources}\x1f{int(ignorable)}\x1f"
    if session_id is None:
        return _blake2b(prev + head.encode() + data, digest_size=32).digest()
    bound = _V2_DOMAIN + session_id.encode() + b"\x1f" + prev + head.encode() + data
    return _V2_PREFIX + _blake2b(bound, digest_size=32).digest()


def chain_version_of(digest: bytes) -> int:
    """The chain format a stored hash was made with: 1, 2, or 0 when it is neither."""
    if len(digest) == 32:
        return 1
    if len(digest) == 33 and digest[:1] == _V2_PREFIX:
        return 2
    return 0


def make_row(
    prev_hash: bytes,
    seq: int,
    type_: str,
    time: int,
    surface: SurfaceOp | None,
    sources: tuple[int, ...],
    ignorable: bool,
    data: bytes,
    session_id: str | None = None,
) -> Row:
    """Build the stored row of a committed event, chaining its hash to ``prev_hash`` (format
    2, bound to ``session_id``, when it is given; format 1 otherwise: only for tests that
    build old logs).

    The writer builds every row through here, off the commit path.
    """
    surface_text = "append" if surface is APPEND else encode_surface(surface)
    sources_text = encode_sources(sources)
    digest = chain_hash(
        prev_hash, seq, type_, time, surface_text, sources_text, ignorable, data, session_id
    )
    return Row(seq, type_, time, surface_text, sources_text, ignorable, data, digest)


def make_rows(
    prev_hash: bytes, items: list[tuple[Event, bytes]], session_id: str | None
) -> list[Row]:
    """The stored rows of committed events (each with its payload bytes), in order, chaining
    their hashes from ``prev_hash``: exactly what :func:`make_row` makes of each, in one pass
    (the writer builds a whole round with it).

    Stops before the first event whose seq or time is not a 64-bit integer (no store holds
    it): fewer rows than ``items`` mean ``items[len(rows)]`` is such an event.
    """
    rows: list[Row] = []
    push = rows.append
    # Format 2 hashes start with the same bytes for every event of the session.
    prefix = None if session_id is None else _V2_DOMAIN + session_id.encode() + b"\x1f"
    lo, hi, append_op = INT64_MIN, INT64_MAX, APPEND
    for event, data in items:
        seq, stamp, surface, sources = event.seq, event.time, event.surface, event.sources
        if (
            type(seq) is not int
            or type(stamp) is not int
            or not lo <= seq <= hi
            or not lo <= stamp <= hi
        ):
            break
        type_, ignorable = event.type, event.ignorable
        # Inline for the two common cases: a call per row costs as much as the test.
        if surface is append_op:
            surface_text: str | None = "append"
        elif surface is None:
            surface_text = None
        else:
            surface_text = encode_surface(surface)
        sources_text = "[" + ",".join(map(str, sources)) + "]" if sources else "[]"
        head = (
            f"{seq}\x1f{type_}\x1f{stamp}\x1f{surface_text or ''}\x1f{sources_text}\x1f"
            f"{int(ignorable)}\x1f"
        ).encode()
        if prefix is None:
            digest = _blake2b(prev_hash + head + data, digest_size=32).digest()
        else:
            digest = (
                _V2_PREFIX + _blake2b(prefix + prev_hash + head + data, digest_size=32).digest()
            )
        push(Row(seq, type_, stamp, surface_text, sources_text, ignorable, data, digest))
        prev_hash = digest
    return rows


def rechain(rows: list[Row], session_id: str) -> list[Row]:
    """``rows`` (a verified prefix of another session) chained anew, format 2, under
    ``session_id``: what a fork stores."""
    prev, out = GENESIS_HASH, []
    for r in rows:
        digest = chain_hash(
            prev, r.seq, r.type, r.time, r.surface, r.sources, r.ignorable, r.data, session_id
        )
        out.append(Row(r.seq, r.type, r.time, r.surface, r.sources, r.ignorable, r.data, digest))
        prev = digest
    return out


def decode_event(row: Row, types: EventTypes, *, session_id: str) -> Event:
    """Decode one stored row into an :class:`Event` (no hash check; see :func:`verify_rows`).

    :raises UnsupportedFormatError: the type is unknown and the event is not ignorable.
    :raises CorruptLogError: the row does not decode.
    """
    info = types.get(row.type)
    try:
        if info is None:
            if not row.ignorable:
                raise UnsupportedFormatError(
                    f"session {session_id!r}, seq {row.seq}: event type {row.type!r} is not "
                    "registered and was not written as ignorable",
                    session_id=session_id,
                    seq=row.seq,
                    hint="register the type with EventTypes.register before opening",
                )
            data: Any = Unknown(bytes(row.data))
        else:
            data = info.decode(row.data)
        return Event(
            seq=row.seq,
            type=row.type,
            time=row.time,
            data=data,
            surface=decode_surface(row.surface),
            sources=_sources_decoder.decode(row.sources),
            ignorable=row.ignorable,
        )
    except NewerVersion as exc:
        raise UnsupportedFormatError(
            f"session {session_id!r}, seq {row.seq}: event type {row.type!r} was written as "
            f"version {exc.stored}, newer than version {exc.known} registered here",
            session_id=session_id,
            seq=row.seq,
            hint="upgrade to the code that registers the newer version, or register it with "
            "EventTypes.register_version",
        ) from None
    except (msgspec.DecodeError, ValueError) as exc:
        raise CorruptLogError(
            f"session {session_id!r}, seq {row.seq}: stored event of type {row.type!r} "
            f"does not decode: {exc}",
            session_id=session_id,
            seq=row.seq,
            hint="the row was altered outside eventlog; open with salvage=True to read the "
            "events before it",
        ) from exc


def stored_version(data: bytes) -> int:
    """The payload version stored bytes were written as (1 when unmarked, or malformed)."""
    try:
        return split_version(data)[0]
    except ValueError:
        return 1


def verify_rows(rows: list[Row], prev_hash: bytes, next_seq: int, *, session_id: str) -> bytes:
    """Check seq continuity and the hash chain of consecutive ``rows``; return the last hash.

    The chain format is the one of ``prev_hash`` (of the first row when ``prev_hash`` is the
    genesis); every row must have it.

    :raises CorruptLogError: naming the first seq that fails.
    :raises UnsupportedFormatError: event 0 has a chain format this version does not know.
    """
    version = chain_version_of(prev_hash if prev_hash else rows[0].hash) if rows else 0
    if rows and version == 0 and not prev_hash:
        first = rows[0]
        newer = len(first.hash) == 33 and first.hash[0] > 2
        if newer:
            raise UnsupportedFormatError(
                f"session {session_id!r}, seq {first.seq}: hash chain format {first.hash[0]} "
                "is newer than this eventlog reads",
                session_id=session_id,
                seq=first.seq,
                hint="upgrade eventlog to open it",
            )
    bound = session_id if version == 2 else None
    for row in rows:
        if row.seq != next_seq:
            raise CorruptLogError(
                f"session {session_id!r}, seq {next_seq}: expected event {next_seq}, "
                f"found {row.seq}",
                session_id=session_id,
                seq=next_seq,
                hint="events are missing or duplicated in the store",
            )
        expected = chain_hash(
            prev_hash,
            row.seq,
            row.type,
            row.time,
            row.surface,
            row.sources,
            row.ignorable,
            row.data,
            bound,
        )
        if expected != row.hash:
            found = chain_version_of(row.hash)
            why = (
                f"its hash is of chain format {found or 'unknown'}, the session's is {version}"
                if found != version
                else "hash mismatch, the stored event was altered or damaged"
            )
            raise CorruptLogError(
                f"session {session_id!r}, seq {row.seq}: {why}",
                session_id=session_id,
                seq=row.seq,
                hint="open with salvage=True to read the events before it",
            )
        prev_hash = row.hash
        next_seq += 1
    return prev_hash
