"""The SQLite file: connections, pragmas, tables (docs/stores.md) and the format-version check.

The tables are ``meta``, ``sessions`` and ``events``, each name preceded by the store's
``table_prefix`` (empty by default), so eventlog can share a file with an application that has
tables of those names. Tables of those names that are not eventlog's are refused before
anything is created.

``events.data`` is TEXT so auditors can ``json_extract(data, '$.x')``; rows are bound as bytes
and converted with ``CAST(? AS TEXT)`` (the bytes are the UTF-8 text already, no Python-side
decode) and read back with ``CAST(data AS BLOB)``.
"""

from __future__ import annotations

import os
import re
import sqlite3
from typing import Any

from ..._codec import FORMAT_VERSION
from ..._errors import UnsupportedFormatError, ValidationError
from .._base import ATTACHMENT_COLUMNS, SNAPSHOT_COLUMNS, TABLE_COLUMNS
from ._transaction import transaction

__all__ = (
    "SYNCHRONOUS",
    "PrefixedConnection",
    "check_table_prefix",
    "connect_reader",
    "connect_writer",
    "has_table",
    "prepare_schema",
    "reserve_wal",
)

#: ``durability`` option → ``PRAGMA synchronous`` (in WAL mode).
SYNCHRONOUS = {"power-loss": "FULL", "process-crash": "NORMAL"}

_TABLES = (
    """CREATE TABLE IF NOT EXISTS {p}meta (format_version INTEGER NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS {p}sessions (
        id TEXT PRIMARY KEY,
        created_at INTEGER NOT NULL,
        parent_id TEXT,
        fork_seq INTEGER,
        metadata TEXT NOT NULL DEFAULT '{}',
        head INTEGER NOT NULL DEFAULT -1,
        writer TEXT
    )""",
    """CREATE TABLE IF NOT EXISTS {p}events (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        type TEXT NOT NULL,
        time INTEGER NOT NULL,
        surface TEXT,
        sources TEXT NOT NULL,
        ignorable INTEGER NOT NULL,
        data TEXT NOT NULL,
        hash BLOB NOT NULL,
        PRIMARY KEY (session_id, seq)
    )""",
)


#: The tables a store makes later, with its first attachment and its first snapshot.
_LATER = {"attachments": ATTACHMENT_COLUMNS, "snapshots": SNAPSHOT_COLUMNS}

_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}")


def check_table_prefix(prefix: object) -> str:
    """:raises ValidationError: ``prefix`` is not a letter followed by up to 31 letters,
    digits or underscores (it becomes part of SQL table names)."""
    if prefix == "":
        return ""
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        raise ValidationError(
            f"table_prefix must be a letter followed by up to 31 letters, digits or "
            f"underscores (e.g. 'eventlog_'), got {prefix!r}"
        )
    return prefix


class PrefixedConnection(sqlite3.Connection):
    """A connection whose statements name tables ``{p}sessions``, ``{p}events``, ``{p}meta``:
    ``{p}`` becomes the store's ``table_prefix`` (each statement text is rewritten once)."""

    prefix = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._statements: dict[str, str] = {}

    def _sql(self, sql: str) -> str:
        found = self._statements.get(sql)
        if found is None:
            found = self._statements[sql] = sql.replace("{p}", self.prefix)
        return found

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        return super().execute(self._sql(sql), *args)

    def executemany(self, sql: str, *args: Any) -> sqlite3.Cursor:
        return super().executemany(self._sql(sql), *args)


def _connect(path: str, prefix: str, **options: Any) -> PrefixedConnection:
    connection = sqlite3.connect(path, factory=PrefixedConnection, **options)
    assert isinstance(connection, PrefixedConnection)
    connection.prefix = prefix
    return connection


def connect_writer(
    path: str, *, synchronous: str, busy_timeout: float, prefix: str = ""
) -> sqlite3.Connection:
    """The writer connection: autocommit (the code issues ``BEGIN IMMEDIATE``), WAL. Opening
    it waits up to ``busy_timeout`` for other processes' locks; afterwards its busy timeout is
    zero (each call that may wait sets its own: ``_transaction.waiting_for_lock``)."""
    connection = _connect(
        path, prefix, timeout=busy_timeout, isolation_level=None, check_same_thread=False
    )
    try:
        connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise sqlite3.OperationalError(f"cannot switch {path} to WAL (journal mode {mode})")
        connection.execute(f"PRAGMA synchronous = {synchronous}")
        connection.execute("PRAGMA busy_timeout = 0")
    except BaseException:
        connection.close()
        raise
    return connection


def connect_reader(path: str, *, busy_timeout: float, prefix: str = "") -> sqlite3.Connection:
    """A reader connection: autocommit, so each statement sees the latest commit; read-only.
    Used on the thread that opened it only (the event loop's), which sqlite3 checks."""
    connection = _connect(path, prefix, timeout=busy_timeout, isolation_level=None)
    try:
        connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        connection.execute("PRAGMA query_only = 1")
    except BaseException:
        connection.close()
        raise
    return connection


def has_table(connection: sqlite3.Connection, name: str) -> bool:
    """Whether the store's table ``name`` (``{p}name``) exists. SQLite reports a statement on
    a missing table with its generic code (``SQLITE_ERROR``), so a read of a table made on
    first use (snapshots, attachments) that fails asks the schema, not the message."""
    found = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '{p}' || ?", (name,)
    )
    return found.fetchone() is not None


def prepare_schema(connection: sqlite3.Connection, path: str) -> None:
    """Create the tables on first use; refuse a file written by a newer (or unknown) format,
    and a file whose tables of these names belong to another application.

    :raises UnsupportedFormatError: the stored format version is not this library's, or a
        table of eventlog's names is not eventlog's (nothing is created then).
    """
    # An existing database is only read: no write lock at start (many processes may start at
    # once) and a read-only file can still be opened by an auditor.
    if _ours(connection, path):
        return
    with transaction(connection):
        if _ours(connection, path):  # another process created them meanwhile
            return
        for statement in _TABLES:
            connection.execute(statement)
        connection.execute("INSERT INTO {p}meta (format_version) VALUES (?)", (FORMAT_VERSION,))


def _ours(connection: sqlite3.Connection, path: str) -> bool:
    """True when eventlog's tables exist (and the version is readable), False when none of
    them exists.

    :raises UnsupportedFormatError: some exist but are another application's (or half made).
    """
    prefix = getattr(connection, "prefix", "")
    found = {}
    for name, columns in TABLE_COLUMNS.items():
        table = prefix + name
        info = connection.execute(f'PRAGMA table_info("{table}")').fetchall()
        if info:
            # Every column of ours (a later format may add some: its version says so).
            found[table] = columns <= {row[1] for row in info}
    # The tables made later (first attachment, first snapshot): missing is fine, another
    # application's is not (every write of the store's would fail on it).
    for name, columns in _LATER.items():
        info = connection.execute(f'PRAGMA table_info("{prefix}{name}")').fetchall()
        if info and not columns <= {row[1] for row in info}:
            found[prefix + name] = False
    # An index or a view of one of these names is not a table of ours either: CREATE TABLE
    # IF NOT EXISTS fails on an index ("there is already an index named ..."), and a view
    # would pass the column check. Names are compared as SQLite does, without case.
    names = {(prefix + name).lower(): prefix + name for name in (*TABLE_COLUMNS, *_LATER)}
    for (name,) in connection.execute(
        "SELECT lower(name) FROM sqlite_master WHERE type IN ('index', 'view')"
        f" AND lower(name) IN ({', '.join('?' * len(names))})",
        list(names),
    ).fetchall():
        found[names[name]] = False
    if not found:
        return False
    version = None
    if all(found.values()) and len(found) == len(TABLE_COLUMNS):
        version = connection.execute("SELECT format_version FROM {p}meta").fetchall()
    if not version:
        # Name the foreign ones; when none is, the set is half made: name what is there.
        foreign = ", ".join(
            sorted(name for name, ours in found.items() if not ours) or sorted(found)
        )
        raise UnsupportedFormatError(
            f"SQLite database {path} already holds table(s) {foreign} that are not "
            "eventlog's; nothing was created",
            hint="give this store its own tables with table_prefix= (e.g. "
            "table_prefix='eventlog_'), or its own file",
        )
    _check_version(version, path)
    return True


#: Bytes of WAL file :func:`reserve_wal` makes sure exist: a bit more than the WAL holds at the
#: default auto-checkpoint (1000 pages of 4 KiB plus frame headers), after which SQLite starts
#: again at the front of the file, so a steady stream of commits never grows it.
WAL_RESERVE = 4608 * 1024


def reserve_wal(connection: sqlite3.Connection, path: str) -> None:
    """Grow a short WAL file to :data:`WAL_RESERVE` bytes, written and synced (best effort).

    Why: a commit that appends to the WAL past its end changes the file's size and allocates blocks,
    so its fsync also commits file-system metadata (a journal commit on ext4), which makes a small
    commit markedly slower (``benchmarks/SQLITE.md``). SQLite reuses its WAL from the front after
    each checkpoint, so once the file is that long, commits only overwrite. It grows the file by
    letting one transaction spill zero pages into the WAL and rolling it back: the frames are not
    committed (SQLite's own rollback of a spilled transaction; recovery ignores frames after the
    last commit), and the next commit overwrites them. Skipped when the WAL is long enough already
    (another connection keeps it) and, silently, when the file cannot be written (read-only, disk
    full): it only makes commits cheaper, it guarantees nothing.
    """
    wal = f"{path}-wal"
    try:
        if os.path.getsize(wal) >= WAL_RESERVE:
            return
    except OSError:
        pass  # not created yet: the spill creates it
    (cache_size,) = connection.execute("PRAGMA cache_size").fetchone()
    try:
        # A tiny page cache makes the transaction spill its pages to the WAL as it goes.
        connection.execute("PRAGMA cache_size = 8")
        with transaction(connection, commit=False):
            connection.execute("CREATE TABLE eventlog_wal_reserve (b BLOB)")
            connection.execute(
                "INSERT INTO eventlog_wal_reserve VALUES (zeroblob(?))", (WAL_RESERVE,)
            )
        # The blocks are allocated now; sync them (and the new size) once, here, rather than
        # in the first commit's fsync.
        fd = os.open(wal, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except (sqlite3.Error, OSError):
        pass  # read-only or full: commits still work, each just costs a little more
    finally:
        connection.execute(f"PRAGMA cache_size = {int(cache_size)}")


def _check_version(found: list[tuple[object]], path: str) -> None:
    version = found[0][0]
    if version == FORMAT_VERSION:
        return
    if isinstance(version, int) and version > FORMAT_VERSION:
        raise UnsupportedFormatError(
            f"SQLite database {path} has format version {version}, newer than this eventlog "
            f"reads (version {FORMAT_VERSION})",
            hint="upgrade eventlog to open it",
        )
    raise UnsupportedFormatError(
        f"SQLite database {path} has unknown format version {version!r}",
        hint="this file was not written by eventlog",
    )
