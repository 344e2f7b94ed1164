"""``import_dsh``: a DeepSeek Harness session log becomes a new eventlog session.

Three phases, so that nothing is half-imported:

1. *parse* the whole file (:func:`~eventlog.importers.parse_dsh`): a malformed line
   raises before anything is created;
2. *plan* every line: core events map onto the vocabulary
   (:class:`~eventlog.importers._dsh_convert.Converter`), stream chunks are folded away, every
   other type becomes an ignorable ``dsh/<type>`` extension event with its data intact;
3. *commit* the plan into a new session with ``Session.append`` (which validates each event),
   flush, close. If anything fails on the way (a store error, a cancel), the new session is
   deleted again.

dsh seqs are renumbered (folded chunks take no seq), so ``sourceEventSeqs`` and replace
``start``/``end`` are remapped; a source naming a folded chunk is dropped (the settled
``assistant/message`` holds its content).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio
import msgspec

from .._attachments import referenced_digests
from .._errors import EventLogError, ValidationError
from .._event import APPEND, Replace, SurfaceOp
from .._registry import EventTypes
from .._session import Session
from ..stores import Store
from ._dsh_convert import Converted, Converter
from ._dsh_format import DshFormatError, DshLog, DshRecord, parse_dsh, read_dsh_lines
from ._dsh_messages import Unconvertible

__all__ = (
    "EXTENSION_PREFIX",
    "FOLDED_TYPES",
    "ORIGINAL_TYPE",
    "ImportReport",
    "Refusal",
    "import_dsh",
)

#: Prefix of the extension type a dsh type is kept under: ``session/title`` → ``dsh/session/title``.
EXTENSION_PREFIX = "dsh/"
#: The extension event holding the original data of a core event the vocabulary cannot hold
#: in full: ``{"type": <dsh type>, "data": <dsh data>}``; its ``sources`` name the mapped event.
ORIGINAL_TYPE = "dsh/original"
#: Stream deltas the settled ``assistant/message`` already holds: folded away, counted.
FOLDED_TYPES = frozenset({"assistant/chunk", "text-chunks", "reasoning-chunks", "tool-call-chunks"})


class Refusal(msgspec.Struct, frozen=True, kw_only=True):
    """A dsh event not imported as the core event it is (``ImportReport.refused``), or
    changed on the way in (``ImportReport.departures``).

    :ivar line: 1-based line number in the dsh file.
    :ivar type: the dsh event type.
    :ivar reason: why; ends with what was done instead (kept as an extension, not imported,
        raised, dropped, folded away).
    """

    line: int
    type: str
    reason: str


class ImportReport(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`import_dsh` did with one file.

    :ivar file: the path imported (``"<lines>"`` for lines given directly).
    :ivar session_id: the new session.
    :ivar lines: lines read, header included.
    :ivar dsh_events: events in the dsh log (each member of a packed row counts as one).
    :ivar events: events written to the session.
    :ivar core: dsh events imported as core vocabulary events.
    :ivar extensions: dsh events kept as ignorable ``dsh/<type>`` extension events (plugin-owned
        types, and core events that did not fit, see ``refused``).
    :ivar originals: ``dsh/original`` events keeping data a core payload could not hold.
    :ivar folded: stream chunk events folded away (``assistant/chunk`` and packed members).
    :ivar packed_rows: packed chunk rows among the folded.
    :ivar refused: events not imported as their core type, with line number and reason.
    :ivar departures: events imported changed: a time raised to the one before it, sources
        naming no earlier event dropped, stream chunks no message settled folded away, line
        keys the dsh format does not have dropped.
    :ivar losses: what the core payloads could not hold, by label (kept in ``dsh/original``).
    :ivar notes: remarks about the file (e.g. a header without a version).
    :ivar open_turn: the turn left open at the end of the log (a crashed run), if any; run
        recovery on the session to close it.
    """

    file: str
    session_id: str
    lines: int
    dsh_events: int
    events: int
    core: int
    extensions: int
    originals: int
    folded: int
    packed_rows: int
    refused: tuple[Refusal, ...] = ()
    departures: tuple[Refusal, ...] = ()
    losses: dict[str, int] = msgspec.field(default_factory=dict)
    notes: tuple[str, ...] = ()
    open_turn: int | None = None

    @property
    def complete(self) -> bool:
        """True when every dsh event was imported as itself and unchanged: nothing refused,
        no departure (the command exits 1 otherwise, unless told to accept them)."""
        return not self.refused and not self.departures

    def summary(self) -> str:
        """One human-readable line per fact, for the command line."""
        lines = [
            f"{self.file} -> session {self.session_id}: {_counted(self.events, 'event')} "
            f"({self.core} core, {self.extensions} extension, {self.originals} dsh/original) "
            f"from {_counted(self.dsh_events, 'dsh event')}; "
            f"{_counted(self.folded, 'chunk event')} folded "
            f"({_counted(self.packed_rows, 'packed row')})",
        ]
        lines += [f"  note: {note}" for note in self.notes]
        lines += [f"  {self.file}:{r.line}: refused ({r.type}): {r.reason}" for r in self.refused]
        lines += [
            f"  {self.file}:{r.line}: changed ({r.type}): {r.reason}" for r in self.departures
        ]
        if self.open_turn is not None:
            lines.append(f"  turn {self.open_turn} is open at the end (run `recover`)")
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class _Planned:
    """One dsh event to commit: as a core event (``converted``) or as an extension."""

    record: DshRecord
    converted: Converted | None = None
    refusal: str | None = None  # why a core type is kept as an extension
    departures: list[str] = field(default_factory=list)  # how it is imported changed


async def import_dsh(
    store: Store,
    source: str | os.PathLike[str] | Iterable[str],
    *,
    session_id: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> ImportReport:
    """Import one DeepSeek Harness (dsh) version-0 JSONL session log into a new session.

    The whole log is parsed and checked before the session is created, and the session is
    deleted again if the import fails half-way: either everything is imported or nothing is.
    The dsh header becomes session metadata (``{"imported_from": "dsh", "dsh_file": ...,
    "dsh_header": {...}}``, merged over ``metadata``). Core events map onto the vocabulary;
    ``assistant/chunk`` events and packed chunk rows are folded away (counted); every other
    type is kept as an ignorable extension event ``dsh/<type>`` with its data intact, registered
    on demand in ``store.types`` (payload ``dict[str, Any]``). An open turn at the end (a
    crashed run) is imported as it is: ``recovery.repair`` closes it.

    :param store: an open store (``async with open_store(url) as store``).
    :param source: a path to a ``.jsonl`` file, or the log's lines.
    :param session_id: the new session's id (random when ``None``).
    :param metadata: extra session metadata.
    :returns: the :class:`ImportReport` (the session is flushed and closed; open it by
        ``report.session_id``).
    :raises DshFormatError: a line is malformed (names file and line); nothing was created.
    :raises UnsupportedFormatError: the log is zstd-compressed (no zstandard dependency) or
        its header names a format version other than 0; nothing was created.
    :raises SessionExistsError: ``session_id`` is taken.
    :raises StoreWriteError: the store failed; the partial session was deleted.
    :raises OSError: the file cannot be read.
    """
    if isinstance(source, str | os.PathLike):
        file = os.fspath(source)
        log = parse_dsh(read_dsh_lines(file), file=file)
    else:
        log = parse_dsh(source)
    plan = _plan(log)
    try:
        session = await store.create(session_id, metadata=_metadata(log, metadata))
    except ValidationError as exc:
        if "dsh_header" not in exc.message:
            raise
        # The header is kept as metadata, held to the rules of any metadata.
        raise DshFormatError(log.file, 1, f"the session header: {exc.message}") from None
    try:
        report = _Committer(session, log).commit(plan)
        await session.flush()
        await session.aclose()
    except BaseException:
        with anyio.CancelScope(shield=True):
            await _discard(store, session)
        raise
    return report


def _plan(log: DshLog) -> list[_Planned]:
    """Map every record; notes about the log go to ``log.notes``."""
    converter = Converter()
    plan: list[_Planned] = []
    unsettled: dict[tuple[Any, Any], list[int]] = {}  # (turn, step) -> [plan index, chunks]
    for record in log.records:
        if record.type in FOLDED_TYPES:
            key = _step_of(record.data)
            unsettled.setdefault(key, [len(plan), 0])[1] += record.width
            plan.append(_Planned(record))
            continue
        if record.type == "assistant/message":
            unsettled.pop(_step_of(record.data), None)
        converter.observe(record.type, record.data)
        if not converter.maps(record.type):
            plan.append(_Planned(record))
            continue
        try:
            plan.append(_Planned(record, converter.convert(record.type, record.data, record.seq)))
        except Unconvertible as exc:
            plan.append(_Planned(record, refusal=str(exc)))
    for (turn, step), (index, chunks) in unsettled.items():
        plan[index].departures.append(
            f"{_counted(chunks, 'chunk event')} of turn {turn} step {step} "
            f"{'was' if chunks == 1 else 'were'} never settled by an assistant/message; "
            f"{'its' if chunks == 1 else 'their'} content is folded away"
        )
    return plan


def _step_of(data: Any) -> tuple[Any, Any]:
    if not isinstance(data, dict):
        return (None, None)
    # Only plain numbers name a step (a list or object there would not even be hashable).
    turn, step = data.get("turn"), data.get("step")
    return (turn if type(turn) is int else None, step if type(step) is int else None)


def _ensure_registered(types: EventTypes, name: str) -> None:
    """Register the extension type ``name`` (payload: the dsh data object) unless known."""
    if name not in types:
        try:
            types.register(name, dict[str, Any], ignorable=True)
        except ValidationError:
            pass  # e.g. a name we cannot register: appending its event reports why


def _metadata(log: DshLog, extra: dict[str, Any] | None) -> dict[str, Any]:
    return {**(extra or {}), "imported_from": "dsh", "dsh_file": log.file, "dsh_header": log.header}


async def _discard(store: Store, session: Session) -> None:
    """Undo a failed import: close and delete the new session (best effort)."""
    try:
        await session.aclose()
    except EventLogError:
        pass  # the store is failing; deleting below is still worth a try
    try:
        await store.delete(session.id)
    except EventLogError:
        pass  # the original error is what the caller needs to see


class _Committer:
    """Appends a plan to a session, remapping dsh seqs to ours as events are committed."""

    def __init__(self, session: Session, log: DshLog) -> None:
        self.session = session
        self.log = log
        self.seqs: dict[int, int] = {}  # dsh seq -> our seq, for every event committed
        self.time = int(log.header["createdAt"])
        self.counts: Counter[str] = Counter()
        self.losses: Counter[str] = Counter()
        self.refused: list[Refusal] = []
        self.departures: list[Refusal] = []
        self.open_turn: int | None = None
        self.notes: list[str] = list(log.notes)

    def commit(self, plan: list[_Planned]) -> ImportReport:
        for planned in plan:
            record = planned.record
            self._note_changes(planned)
            if record.time is not None:
                self.time = max(self.time, record.time)
            if record.type in FOLDED_TYPES:
                self.counts["folded"] += record.width
                self.counts["packed_rows"] += record.packed
            elif planned.converted is not None:
                self._core(record, planned.converted)
            else:
                self._extension(record, planned.refusal)
        return self._report()

    def _note_changes(self, planned: _Planned) -> None:
        """Report what importing ``planned`` changes: folded content, sources, its time."""
        record = planned.record
        for why in planned.departures:
            self._depart(record, why)
        if record.unknown:
            keys = ", ".join(repr(key) for key in record.unknown)
            self._depart(record, f"line key(s) {keys} are not part of the dsh format; dropped")
        stray = [s for s in record.sources if not 0 <= s < record.seq]
        if stray:
            # Provenance pointing nowhere (a hand-edited snapshot): nothing to point at.
            why = f"{len(stray)} sourceEventSeqs name no earlier event (first {stray[0]}); dropped"
            self._depart(record, why)
        if record.time is not None and record.time < self.time:
            # Our log's times never run backwards; a clock that stepped back is clamped.
            why = f"time {record.time} is earlier than the event before ({self.time}); raised to it"
            self._depart(record, why)

    def _core(self, record: DshRecord, converted: Converted) -> None:
        try:
            surface = self._surface(record)
            event = self.session.append(
                converted.type,
                converted.payload,
                surface=surface,
                sources=self._sources(record),
                time=self.time,
            )
        except ValidationError as exc:
            self._extension(record, exc.message)
            return
        self.seqs[record.seq] = event.seq
        self.counts["core"] += 1
        if converted.type == "turn/start":
            self.open_turn = converted.payload.turn
        elif converted.type == "turn/end":
            self.open_turn = None
        if converted.losses:
            self.losses.update(converted.losses)
            self._keep_original(record, event.seq)

    def _keep_original(self, record: DshRecord, seq: int) -> None:
        """Keep what the core payload of ``seq`` could not hold: the whole dsh data."""
        _ensure_registered(self.session.types, ORIGINAL_TYPE)
        try:
            self.session.append(
                ORIGINAL_TYPE,
                {"type": record.type, "data": record.data},
                sources=(seq,),
                time=self.time,
            )
        except ValidationError as exc:  # e.g. over max_event_bytes
            self._refuse(record, f"imported, but its original data was not kept: {exc.message}")
            return
        self.counts["originals"] += 1

    def _extension(self, record: DshRecord, refusal: str | None) -> None:
        name = EXTENSION_PREFIX + record.type
        if name == ORIGINAL_TYPE:
            self._refuse(record, f"{name} is reserved for the importer; not imported")
            return
        _ensure_registered(self.session.types, name)
        try:
            event = self.session.append(
                name, record.data, sources=self._sources(record), time=self.time
            )
        except ValidationError as exc:
            self._refuse(record, f"{refusal + '; ' if refusal else ''}{exc.message}; not imported")
            return
        self.seqs[record.seq] = event.seq
        self.counts["extensions"] += 1
        if refusal is not None:
            self._refuse(record, f"{refusal}; kept as {name}")

    def _refuse(self, record: DshRecord, reason: str) -> None:
        self.refused.append(Refusal(line=record.line, type=record.type, reason=reason))

    def _depart(self, record: DshRecord, reason: str) -> None:
        self.departures.append(Refusal(line=record.line, type=record.type, reason=reason))

    def _surface(self, record: DshRecord) -> SurfaceOp | None:
        op = record.surface_op
        if op is None:
            return None
        if op == "append":
            return APPEND
        start, end = self.seqs.get(op["start"]), self.seqs.get(op["end"])
        if start is None or end is None:
            missing = op["start"] if start is None else op["end"]
            raise ValidationError(f"replace names dsh seq {missing}, which was not imported")
        return Replace(start, end)

    def _sources(self, record: DshRecord) -> tuple[int, ...]:
        # A source naming a folded chunk (or an event not imported) has nothing to point at.
        return tuple(self.seqs[s] for s in record.sources if s in self.seqs and s < record.seq)

    def _report(self) -> ImportReport:
        records = self.log.records
        digests = {d for event in self.session.window() for d in referenced_digests(event.data)}
        if digests:
            self.notes.append(
                f"{_counted(len(digests), 'image attachment')} "
                f"{'is' if len(digests) == 1 else 'are'} referenced by digest; the log does "
                "not hold the bytes (store them with store.put_attachment to send them)"
            )
        return ImportReport(
            file=self.log.file,
            session_id=self.session.id,
            lines=len(records) + 1,
            dsh_events=sum(r.width for r in records),
            events=self.session.head + 1,
            core=self.counts["core"],
            extensions=self.counts["extensions"],
            originals=self.counts["originals"],
            folded=self.counts["folded"],
            packed_rows=self.counts["packed_rows"],
            refused=tuple(self.refused),
            departures=tuple(self.departures),
            losses=dict(sorted(self.losses.items())),
            notes=tuple(self.notes),
            open_turn=self.open_turn,
        )


def _counted(count: int, noun: str) -> str:
    """``1 event``, ``2 events``: the report's lines are read by people."""
    return f"{count} {noun}{'' if count == 1 else 's'}"
