"""Loading a stored log: verify the hash chain, decode, and rebuild the surface index.

The loop is the hot path of ``Store.open`` (docs/stores.md: open must cost little more than a raw
select plus decode), so it is written flat, with locals, and falls back to the general (slower,
fully explaining) functions only when a row fails, to produce the exact error.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from .._codec import (
    CHAIN_VERSION,
    GENESIS_HASH,
    Row,
    chain_hash,
    chain_version_of,
    decode_event,
    decode_surface,
    verify_rows,
)
from .._errors import CorruptLogError, SurfaceError
from .._event import APPEND, Event
from .._grammar import TurnGrammar
from .._registry import EventTypes, NewerVersion
from .._strict import on_fresh_stack
from .._surface import SurfaceIndex, message_delta, plan_transition

__all__ = ("LogLoader",)

_sources_decoder = msgspec.json.Decoder(tuple[int, ...])
#: The types the structural rules look at (see :mod:`eventlog._grammar`).
_STRUCTURAL = frozenset(
    {
        "turn/start",
        "turn/end",
        "step/start",
        "step/end",
        "user/message",
        "assistant/message",
        "tool/outcome",
        "tool/result",
    }
)


class LogLoader:
    """Folds stored rows, chunk by chunk, into events, the chain head and the surface index.

    :ivar events: the events loaded so far (all verified).
    :ivar last_hash: the chain hash of the last loaded event.
    :ivar chain_version: the session's chain format (of event 0; :data:`CHAIN_VERSION` for an
        empty log, which is what its first event will be written with).
    :ivar grammar: the turn and step structure folded so far (not judged).
    :ivar misfit: the first event that breaks the structural rules ``append`` enforces, as
        ``(seq, why)``, or ``None``: logs written before those rules still load; importers
        refuse such a log.
    """

    def __init__(self, types: EventTypes, session_id: str) -> None:
        self.types = types
        self.session_id = session_id
        #: Loaded from a snapshot (:meth:`resume`): ``events`` holds seqs ``base`` on, and
        #: ``pinned`` the older events still on the surface. Else 0 and empty.
        self.base = 0
        self.pinned: dict[int, Event] = {}
        self.events: list[Event] = []
        self.surface = SurfaceIndex()
        self.last_hash = GENESIS_HASH
        self.chain_version = CHAIN_VERSION
        self.grammar = TurnGrammar()
        self.misfit: tuple[int, str] | None = None

    @property
    def head(self) -> int:
        """The seq of the last loaded event (-1 when none)."""
        return self.base + len(self.events) - 1

    def resume(
        self,
        *,
        head: Event,
        last_hash: bytes,
        surface: SurfaceIndex,
        grammar: TurnGrammar,
        pinned: dict[int, Event],
    ) -> None:
        """Start from a snapshot's state instead of seq 0: its last event ``head`` (whose
        stored hash is ``last_hash``), surface, grammar and the older surface events. The
        rows fed next continue at ``head.seq + 1``."""
        self.base = head.seq
        self.events = [head]
        self.last_hash = last_hash
        self.chain_version = chain_version_of(last_hash)
        self.surface = surface
        self.grammar = grammar
        self.pinned = pinned

    def payload_of(self, seq: int) -> object:
        """The payload of loaded event ``seq`` (resident or pinned)."""
        if seq >= self.base:
            return self.events[seq - self.base].data
        return self.pinned[seq].data

    def feed(self, rows: Sequence[Row]) -> None:
        """Load the next consecutive rows. Works whatever the caller's stack depth (a
        decode that runs out of it is redone on a fresh thread).

        :raises CorruptLogError: a row's seq, hash, payload or surface operation is bad; the
            rows before it are loaded.
        :raises UnsupportedFormatError: a row has an unknown, non-ignorable type, or event 0
            a chain format this version does not know.
        """
        start = len(self.events)
        try:
            self._feed(rows)
        except RecursionError:
            done = len(self.events) - start
            on_fresh_stack(self._feed, rows[done:])

    def _feed(self, rows: Sequence[Row]) -> None:
        events = self.events
        grammar = self.grammar
        append_event = events.append
        get_type = self.types.get
        surface = self.surface
        decode_sources = _sources_decoder.decode
        prev = self.last_hash
        seq = self.base + len(events)
        if seq == 0 and rows:
            self.chain_version = chain_version_of(rows[0].hash)
        bound = self.session_id if self.chain_version == 2 else None
        for row in rows:
            row_seq, type_, time_, surface_text, sources_text = (
                row.seq,
                row.type,
                row.time,
                row.surface,
                row.sources,
            )
            ignorable, data = row.ignorable, row.data
            digest = chain_hash(
                prev, row_seq, type_, time_, surface_text, sources_text, ignorable, data, bound
            )
            info = get_type(type_)
            if row_seq != seq or digest != row.hash or info is None:
                self._fail(row, prev, seq)  # raises the precise error (or decodes Unknown)
                event = decode_event(row, self.types, session_id=self.session_id)
            else:
                try:
                    payload = info.decode(data)
                    op = APPEND if surface_text == "append" else decode_surface(surface_text)
                    sources = () if sources_text == "[]" else decode_sources(sources_text)
                except (msgspec.DecodeError, ValueError, NewerVersion):
                    # decode_event raises the CorruptLogError that explains this row.
                    decode_event(row, self.types, session_id=self.session_id)
                    raise
                event = Event(
                    seq=row_seq,
                    type=type_,
                    time=time_,
                    data=payload,
                    surface=op,
                    sources=sources,
                    ignorable=ignorable,
                )
            if event.surface is not None:
                self._fold_surface(surface, event)
            if type_ in _STRUCTURAL:
                misfit = grammar.check(type_, event.data)
                if misfit is not None and self.misfit is None:
                    self.misfit = (row_seq, misfit)
                grammar.advance(type_, event.data)
            append_event(event)
            prev = digest
            seq += 1
            self.last_hash = prev

    def _fail(self, row: Row, prev: bytes, seq: int) -> None:
        # Raises CorruptLogError for a bad seq or hash, naming the seq.
        verify_rows([row], prev, seq, session_id=self.session_id)

    def _fold_surface(self, surface: SurfaceIndex, event: Event) -> None:
        if event.surface is APPEND:
            message = getattr(event.data, "message", None)
            if message is not None:
                surface.append_node(event.seq, message_delta(message))
                return
        try:
            surface.apply(
                plan_transition(
                    surface,
                    seq=event.seq,
                    type_=event.type,
                    data=event.data,
                    op=event.surface or APPEND,
                    sources=event.sources,
                    session_id=self.session_id,
                    payload_of=self.payload_of,
                )
            )
        except (SurfaceError, AttributeError) as exc:
            raise CorruptLogError(
                f"session {self.session_id!r}, seq {event.seq}: stored surface operation is "
                f"invalid: {exc}",
                session_id=self.session_id,
                seq=event.seq,
                hint="open with salvage=True to read the events before it",
            ) from exc
