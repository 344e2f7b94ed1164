"""Whether a SQLite store that holds a writer lease is still open, seen from another process,
without the store writing anything.

A lease is the owner token in ``sessions.writer``. A store releases it when it closes, but a
release is a write: on a disk the store's own files filled it fails, and the token stays. Its
process may live on (it closed one store and goes on with others), so "the process is gone"
(:func:`~eventlog.stores._owners.owner_alive`) does not free the session until it ends.

So a store says it is open through the kernel instead of the disk: on Linux it holds an
open-file-description lock (``F_OFD_SETLK``, a read lock on one byte far past anything SQLite
locks, chosen by the token) on the database file while it is open. The lock takes no disk
space, ends when the store closes its descriptor (and with the process, however it ends), and
another process asks about it with ``F_OFD_GETLK``. The token a store writes is marked
(:data:`_MARK`) only once it holds its lock, so a token without the mark (an earlier version's,
or a platform without such locks) is judged as before, by its process alone. A lock is shared
by a process forked without ``exec`` (it inherits the descriptor): such a store counts as open
until the child ends too, never the other way round.
"""

from __future__ import annotations

import hashlib
import os
import socket
import sqlite3
import struct

from .._owners import owner_alive

try:
    import fcntl

    _GETLK: int | None = getattr(fcntl, "F_OFD_GETLK", None)
    _SETLK: int | None = getattr(fcntl, "F_OFD_SETLK", None)
except ImportError:  # not a POSIX platform: no owner locks, tokens are judged by process
    _GETLK = _SETLK = None

__all__ = ("HOLDER", "OwnerLocks", "holder_alive", "holder_of", "writer_alive")

#: Appended to the token of a store that holds its owner lock.
_MARK = ":ofd"
#: Owner locks lie at this offset and above: far past SQLite's own lock bytes (at 1 GiB).
_BASE = 1 << 61
# ``struct flock`` (Linux): l_type, l_whence, l_start, l_len, l_pid, padded to 8 bytes.
_FLOCK = "hhqqi4x"


def _offset(owner: str) -> int:
    return _BASE + int.from_bytes(hashlib.blake2b(owner.encode(), digest_size=7).digest())


def _flock(kind: int, owner: str) -> bytes:
    return struct.pack(_FLOCK, kind, os.SEEK_SET, _offset(owner), 1, 0)


class OwnerLocks:
    """The owner locks a store holds on its database file, one per owner token it writes.

    :param path: the database file.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._held: dict[str, int] = {}

    def token(self, owner: str) -> str:
        """The token to store for ``owner``: marked once its lock is held (taken now, before
        any lease names it), else ``owner`` as it is (no such locks here, or the file cannot
        be opened: the token is then judged by its process)."""
        if owner in self._held:
            return owner + _MARK
        if _SETLK is None:
            return owner
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return owner
        try:
            fcntl.fcntl(fd, _SETLK, _flock(fcntl.F_RDLCK, owner))
        except OSError:
            os.close(fd)
            return owner
        self._held[owner] = fd
        return owner + _MARK

    def stored(self, owner: str) -> str:
        """The token ``owner``'s leases were written with (taking no lock)."""
        return owner + _MARK if owner in self._held else owner

    def close(self) -> None:
        """Let every lock go: leases still naming these tokens may be taken over at once."""
        held, self._held = self._held, {}
        for fd in held.values():
            os.close(fd)


def holder_alive(connection: sqlite3.Connection, holder: str) -> bool:
    """Whether the store named by the lease token ``holder`` may still write. A marked token
    of another process of this host: while its owner lock is held on the database
    ``connection`` has open (a kernel fact on the file, so it holds across PID namespaces
    too). Any other token: :func:`owner_alive` (by its process, or this process's stores)."""
    owner = holder.removesuffix(_MARK)
    if owner == holder or _GETLK is None:
        return owner_alive(owner)
    host, _, rest = owner.partition(":")
    if host != socket.gethostname() or rest.partition(":")[0] == str(os.getpid()):
        # Another host's locks are not seen here; this process knows its own stores.
        return owner_alive(owner)
    locked = _locked(_database_path(connection), owner)
    return owner_alive(owner) if locked is None else locked


def _database_path(connection: sqlite3.Connection) -> str:
    for _, name, path in connection.execute("PRAGMA database_list"):
        if name == "main":
            return str(path)
    return ""


def _locked(path: str, owner: str) -> bool | None:
    """Whether some open file description holds ``owner``'s lock on ``path``; ``None`` when
    that cannot be told (the file cannot be opened or asked)."""
    assert _GETLK is not None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        answer = fcntl.fcntl(fd, _GETLK, _flock(fcntl.F_WRLCK, owner))
    except OSError:
        return None
    finally:
        os.close(fd)
    return bool(struct.unpack(_FLOCK, answer)[0] != fcntl.F_UNLCK)


#: The lease holder's token as bytes: a damaged one must not fail the read (see `holder_of`).
HOLDER = "SELECT CAST(writer AS BLOB) FROM {p}sessions WHERE id = ?"


def holder_of(raw: bytes | None) -> str | None:
    """The lease holder's token; damaged bytes are kept visible (and name no live process of
    this host, so the lease counts as held elsewhere)."""
    return None if raw is None else bytes(raw).decode(errors="backslashreplace")


def writer_alive(path: str, prefix: str, session_id: str) -> bool:
    """Whether a live store holds ``session_id``'s lease in the file at ``path``: its own
    read-only connection, so it never waits behind the store's writer and never writes."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            found = db.execute(HOLDER.replace("{p}", prefix), (session_id,)).fetchone()
            holder = None if found is None else holder_of(found[0])
            return holder is not None and holder_alive(db, holder)
        finally:
            db.close()
    except sqlite3.Error:
        return False
