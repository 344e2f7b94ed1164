"""Stores: where sessions live. ``open_store(url)`` picks the backend from the URL."""

from ._lease_state import writer_alive
from ._loader import LogLoader
from ._writer import Batch
from .base import Backend, SessionInfo, SessionRecord, Store
from .logstore import LogStore
from .memory import MemoryBackend, MemoryData
from .url import open_store

__all__ = (
    "Backend",
    "Batch",
    "LogLoader",
    "LogStore",
    "MemoryBackend",
    "MemoryData",
    "SessionInfo",
    "SessionRecord",
    "Store",
    "open_store",
    "writer_alive",
)
