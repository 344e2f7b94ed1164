"""The store conformance suite: one contract, every store.

Subclass :class:`StoreConformance` in a test module (the base class name does not start with
``Test`` so pytest collects only subclasses) and implement three hooks::

    class TestMyStore(StoreConformance):
        @pytest.fixture(autouse=True)
        def _location(self, tmp_path: Path) -> None:
            self.path = tmp_path / "sessions.db"

        def make_store(self, **options: Any) -> LogStore:
            return open_store(f"sqlite:///{self.path}", **options)

        async def tamper_event(self, session_id: str, seq: int) -> None:
            ...  # side door: the stored data becomes flip_a_letter(data)

        async def tamper_attachment(self, digest: str) -> None:
            ...  # side door: flip one byte of a stored attachment

``make_store`` returns a new, not yet entered store over the same stored data each time it is
called, so a test can close one and open another to act out a restart.
"""

from __future__ import annotations

import pytest

from ._integrity import IntegrityCases
from ._sessions import SessionCases
from ._snapshots import SnapshotCases
from ._writers import WriterCases

__all__ = ("StoreConformance",)

# The cases are grouped by what they hold a store to, one module each, all built on the hooks
# of ``_hooks.StoreHooks``; this class only gathers them under the one name stores subclass.


@pytest.mark.anyio
class StoreConformance(SessionCases, WriterCases, IntegrityCases, SnapshotCases):
    """The contract of :class:`~eventlog.Store`, run against one store.

    Subclass it under a name starting with ``Test`` and give it the three hooks
    (``make_store``, ``tamper_event``, ``tamper_attachment``); pytest (with anyio's plugin,
    which anyio installs) runs every test against your store. The memory store's subclass,
    whole::

        class TestMyStore(StoreConformance):
            @pytest.fixture(autouse=True)
            def _data(self) -> None:
                self.data = MemoryData()

            def make_store(self, **options: Any) -> LogStore:
                return open_store("memory:", data=self.data, **options)

            async def tamper_event(self, session_id: str, seq: int) -> None:
                rows = self.data.rows[session_id]
                rows[seq] = msgspec.structs.replace(rows[seq], data=flip_a_letter(rows[seq].data))

            async def tamper_attachment(self, digest: str) -> None:
                data = bytearray(self.data.attachments[digest])
                data[len(data) // 2] ^= 0x01
                self.data.attachments[digest] = bytes(data)
    """
