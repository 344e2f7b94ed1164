"""The three hooks a store's subclass of ``StoreConformance`` gives: a new store over the
test's stored data, and two side doors to the raw bytes it keeps. Every group of cases
builds on them.
"""

from __future__ import annotations

from typing import Any

from ..stores import LogStore

__all__ = ("StoreHooks",)


class StoreHooks:
    """What every conformance case calls on the store under test (see ``StoreConformance``)."""

    def make_store(self, **options: Any) -> LogStore:
        """A new, not yet entered store over this test's stored data."""
        raise NotImplementedError

    async def tamper_event(self, session_id: str, seq: int) -> None:
        """Flip one byte of the stored data of event ``seq`` (a side door to the raw rows)."""
        raise NotImplementedError

    async def tamper_attachment(self, digest: str) -> None:
        """Flip one byte of the stored bytes of attachment ``digest`` (a side door)."""
        raise NotImplementedError
