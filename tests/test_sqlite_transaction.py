"""The SQLite backend's one transaction helper: commit, rollback on error, and its lock waits.

Every write path of the backend opens its transaction through
``eventlog.stores.sqlite._transaction.transaction``; these scenarios hold it to what the paths
rely on, on a real file with a second connection holding the write lock.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from eventlog.stores.sqlite._transaction import WriteLockBusy, transaction, waiting_for_lock


@pytest.fixture
def connections(tmp_path: Path) -> Iterator[tuple[sqlite3.Connection, sqlite3.Connection]]:
    """The writer (autocommit, WAL, busy timeout zero, as the backend's) and another one."""
    path = tmp_path / "t.db"
    writer = sqlite3.connect(path, isolation_level=None, timeout=0)
    writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("PRAGMA busy_timeout = 0")
    writer.execute("CREATE TABLE t (x INTEGER)")
    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        yield writer, other
    finally:
        writer.close()
        other.close()


def _rows(connection: sqlite3.Connection) -> list[int]:
    return [x for (x,) in connection.execute("SELECT x FROM t ORDER BY x")]


def _busy_timeout(connection: sqlite3.Connection) -> int:
    (ms,) = connection.execute("PRAGMA busy_timeout").fetchone()
    return int(ms)


def test_a_block_that_ends_commits_and_one_that_raises_leaves_nothing(
    connections: tuple[sqlite3.Connection, sqlite3.Connection],
) -> None:
    writer, other = connections
    with transaction(writer):
        writer.execute("INSERT INTO t VALUES (1)")
    # A failure half-way rolls back the rows before it and re-raises the error.
    with pytest.raises(ZeroDivisionError), transaction(writer):
        writer.execute("INSERT INTO t VALUES (2)")
        _ = 1 / 0
    assert not writer.in_transaction
    assert _rows(other) == [1]


def test_a_scratch_transaction_is_rolled_back_even_when_it_ends(
    connections: tuple[sqlite3.Connection, sqlite3.Connection],
) -> None:
    writer, other = connections
    with transaction(writer, commit=False):
        writer.execute("INSERT INTO t VALUES (1)")
        assert _rows(writer) == [1]
    assert not writer.in_transaction
    assert _rows(other) == []


def test_without_a_wait_a_taken_lock_is_refused_at_once(
    connections: tuple[sqlite3.Connection, sqlite3.Connection],
) -> None:
    writer, other = connections
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    with pytest.raises(WriteLockBusy), transaction(writer, wait_ms=0):
        pytest.fail("the block must not run")
    assert not writer.in_transaction
    other.execute("ROLLBACK")
    # Once the lock is free the same call begins and commits.
    with transaction(writer, wait_ms=0):
        writer.execute("INSERT INTO t VALUES (1)")
    assert _rows(other) == [1]


def test_a_wait_runs_out_as_database_is_locked_and_leaves_the_timeout_at_zero(
    connections: tuple[sqlite3.Connection, sqlite3.Connection],
) -> None:
    writer, other = connections
    other.execute("BEGIN IMMEDIATE")
    # Waiting only when the lock is taken (a write round on the writer thread): the wait ends
    # with SQLite's own error, not WriteLockBusy, and the connection waits for nothing again.
    with pytest.raises(sqlite3.OperationalError, match="database is locked"):
        with transaction(writer, wait_ms=30):
            pytest.fail("the block must not run")
    assert _busy_timeout(writer) == 0
    # A job run under waiting_for_lock waits as long as its busy timeout says, then the same.
    with pytest.raises(sqlite3.OperationalError, match="database is locked"):
        waiting_for_lock(writer, 30, _insert_one)
    assert _busy_timeout(writer) == 0
    assert not writer.in_transaction
    other.execute("ROLLBACK")
    assert _rows(other) == []


def _insert_one(connection: sqlite3.Connection) -> None:
    with transaction(connection):
        connection.execute("INSERT INTO t VALUES (1)")
