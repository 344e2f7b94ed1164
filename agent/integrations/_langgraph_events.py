"""The LangGraph saver's event types and its session ids.

A thread's checkpoints and pending writes are two app event types in one eventlog session per
thread. Both are registered ``ignorable`` so that a reader that does not know them (the
``eventlog`` command, an app that never imported this module) still opens, verifies and lists
the session; the saver itself decodes them.

Values stay in LangGraph's own serialisation (``serde.dumps_typed``: a type tag and bytes), so
what LangGraph reads back is exactly what it wrote; the bytes are base64 in the JSON body.
"""

from __future__ import annotations

import hashlib
import re

import msgspec

from eventlog import EventTypes, ValidationError

from ._types import register_ignorable, shown

__all__ = (
    "CHECKPOINT",
    "WRITES",
    "Blob",
    "Checkpointed",
    "Typed",
    "Write",
    "WritesPut",
    "langgraph_types",
    "register_langgraph_types",
    "session_id_for",
)

#: Type names: part of the on-disk format.
CHECKPOINT = "langgraph/checkpoint"
WRITES = "langgraph/writes"

#: Thread ids that are already valid session ids (and short enough for the prefix) are kept
#: readable; any other text is hashed. The two prefixes differ at their third character, so
#: no readable id can equal a hashed one. Matched whole (``fullmatch``): ``$`` would also
#: match before a final newline, and ``lg-t\n`` is no session id.
_READABLE = re.compile(r"[A-Za-z0-9._:@-]{1,120}")
_READABLE_PREFIX = "lg-"
_HASHED_PREFIX = "lgh-"


class Typed(msgspec.Struct, frozen=True, kw_only=True):
    """One value as LangGraph's serializer wrote it (``dumps_typed``)."""

    type: str
    data: bytes

    @classmethod
    def of(cls, pair: tuple[str, bytes]) -> Typed:
        return cls(type=pair[0], data=pair[1])

    def pair(self) -> tuple[str, bytes]:
        return (self.type, self.data)


class Blob(msgspec.Struct, frozen=True, kw_only=True):
    """A channel's value at a new version (``type == "empty"`` when the channel is empty)."""

    channel: str
    version: str | int | float
    value: Typed


class Checkpointed(msgspec.Struct, frozen=True, kw_only=True):
    """``langgraph/checkpoint``: one ``put``.

    :ivar checkpoint: the checkpoint without its channel values (those are in ``blobs``, one
        per channel whose version this checkpoint bumped, as LangGraph's own savers store them).
    :ivar metadata: the checkpoint metadata merged with the config's, as ``get_checkpoint_metadata``
        builds it.
    """

    ns: str
    id: str
    parent: str | None
    checkpoint: Typed
    metadata: Typed
    blobs: list[Blob] = msgspec.field(default_factory=list)


class Write(msgspec.Struct, frozen=True, kw_only=True):
    """One pending write: ``idx`` is its position, or the negative ``WRITES_IDX_MAP`` index of a
    special channel (errors, interrupts), which replaces rather than keeps the first."""

    idx: int
    channel: str
    value: Typed


class WritesPut(msgspec.Struct, frozen=True, kw_only=True):
    """``langgraph/writes``: one ``put_writes`` of a task against checkpoint ``checkpoint_id``.

    Only the writes the call changed are logged (a regular write already stored for the same
    task and index is kept, as every LangGraph saver does).
    """

    ns: str
    checkpoint_id: str
    task_id: str
    task_path: str = ""
    writes: list[Write] = msgspec.field(default_factory=list)


def register_langgraph_types(types: EventTypes) -> EventTypes:
    """Register the saver's two event types (ignorable) in ``types`` and return it.

    Types already registered with the same payload are left as they are.

    :raises ValidationError: one of the names is registered with another payload.
    """
    pairs = ((CHECKPOINT, Checkpointed), (WRITES, WritesPut))
    return register_ignorable(types, pairs, "LangGraph saver")


def langgraph_types() -> EventTypes:
    """A registry with the core vocabulary and the saver's types: pass it to ``open_store``."""
    return register_langgraph_types(EventTypes())


def session_id_for(thread_id: object) -> str:
    """The session id of a LangGraph thread: every text maps to a valid id, one id per text
    (the text is never normalised: ``"t"``, ``"t\n"``, ``"T"`` and ``"e\u0301"`` against
    ``"\u00e9"`` are different threads, with different sessions).

    A thread id that is already a plain identifier of up to 120 characters stays readable
    (``lg-<thread id>``); any other text becomes ``lgh-<sha256 of its UTF-8>``.

    :raises ValidationError: ``thread_id`` is not a string, or holds a lone surrogate (it has
        no UTF-8 form: the thread's session could not record it).
    """
    if not isinstance(thread_id, str):
        raise ValidationError(
            f"Expected `str`, got `{type(thread_id).__name__}` ({shown(thread_id)}) - at "
            "the thread id"
        )
    if _READABLE.fullmatch(thread_id):
        return _READABLE_PREFIX + thread_id
    try:
        encoded = thread_id.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(
            f"Expected `str` without lone surrogates (they have no UTF-8 form), got "
            f"{shown(thread_id)} - at the thread id",
            hint="LangGraph thread ids are stored as UTF-8 text",
        ) from None
    return _HASHED_PREFIX + hashlib.sha256(encoded).hexdigest()
