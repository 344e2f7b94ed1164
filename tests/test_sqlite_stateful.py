"""The stateful machine (docs/stores.md) on a real SQLite file, the memory store as model."""

from __future__ import annotations

import shutil
import socket
import sqlite3
import tempfile
from pathlib import Path

from hypothesis import settings

from eventlog import open_store
from eventlog.testing._stateful import Storage, store_machine

#: A lease token naming a pid that cannot exist on this host: its owner is dead.
DEAD_OWNER = f"{socket.gethostname()}:2147483647:crashed"


def sqlite_storage() -> Storage:
    directory = Path(tempfile.mkdtemp(prefix="eventlog-stateful-"))
    path = directory / "sessions.db"

    async def process_died() -> None:
        # What a new process finds after a SIGKILL: leases of a process that no longer runs.
        with sqlite3.connect(path) as db:
            db.execute("UPDATE sessions SET writer = ? WHERE writer IS NOT NULL", (DEAD_OWNER,))
        db.close()

    return Storage(
        make_store=lambda **options: open_store(f"sqlite:///{path}", **options),
        process_died=process_died,
        cleanup=lambda: shutil.rmtree(directory, ignore_errors=True),
    )


TestSQLiteAgainstModel = store_machine(sqlite_storage).TestCase
TestSQLiteAgainstModel.settings = settings(TestSQLiteAgainstModel.settings, stateful_step_count=25)
