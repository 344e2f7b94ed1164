"""Stores: where sessions live. ``open_store(url)`` picks the backend from the URL.

Beside the stores, the backend contract (:class:`Backend`) and what backends hold: the rows
(:class:`Row`), the hash chain over them (:func:`verify_rows`, :func:`rechain`) and their
decoding, for tools that read, copy or check raw sessions.
"""

from .._attachments import row_digests
from .._codec import (
    GENESIS_HASH,
    Row,
    chain_hash,
    decode_event,
    encode_surface,
    rechain,
    stored_version,
    verify_rows,
)
from .._session_ports import DEFAULT_MAX_EVENT_BYTES
from ._abilities import BackendAbilities, Pipeline
from ._admit import Departure, check_import
from ._base import (
    Backend,
    BackgroundTask,
    LeaseReader,
    MaskedUrl,
    SessionInfo,
    SessionRecord,
    Snapshots,
    Store,
)
from ._batch import Batch
from ._lease_state import writer_alive
from ._loader import LogLoader
from ._logstore import DEFAULT_SNAPSHOT_EVERY, DEFAULT_TRIM_EVERY, LogStore
from ._memory import MemoryBackend, MemoryData
from ._states import DEFAULT_SNAPSHOT_STATES
from ._url import open_store

__all__ = (
    "DEFAULT_MAX_EVENT_BYTES",
    "DEFAULT_SNAPSHOT_EVERY",
    "DEFAULT_SNAPSHOT_STATES",
    "DEFAULT_TRIM_EVERY",
    "GENESIS_HASH",
    "Row",
    "chain_hash",
    "check_import",
    "decode_event",
    "encode_surface",
    "rechain",
    "row_digests",
    "stored_version",
    "verify_rows",
    "BackgroundTask",
    "Backend",
    "BackendAbilities",
    "Batch",
    "Departure",
    "LeaseReader",
    "LogLoader",
    "LogStore",
    "MaskedUrl",
    "MemoryBackend",
    "MemoryData",
    "Pipeline",
    "SessionInfo",
    "SessionRecord",
    "Snapshots",
    "Store",
    "open_store",
    "writer_alive",
)
