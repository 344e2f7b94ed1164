"""Whether a SQLite writer lease is still held, seen from another process, without the holder
writing anything.

A lease is the owner token in ``sessions.writer``. A store releases it when it closes the
session, but a release is a write: on a disk the store's own files filled it fails, and the
token stays. Its process may live on (it closed one store, or one session, and goes on with
others), so "the process is gone" (:func:`~eventlog.stores._owners.owner_alive`) does not free
the session until it ends.

So a store says it holds a lease through the kernel instead of the disk: on Linux it holds an
open-file-description lock (``F_OFD_SETLK``, a read lock on one byte far past anything SQLite
locks, chosen by the token and the session) on the database file for as long as it holds the
lease, and lets it go when it releases the lease, whether the release's write succeeds or not
(and when it closes, and with its process, however that ends). The lock takes no disk space;
another process asks about it with ``F_OFD_GETLK``. The token a store writes is marked
(:data:`_MARK`) only once it holds the lock, so a token without the mark (an earlier version's,
or a platform without such locks) is judged as before, by its process alone. A lock is shared
by a process forked without ``exec`` (it inherits the descriptor): such a lease counts as held
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

__all__ = ("HOLDER", "LeaseLocks", "holder_alive", "holder_of", "writer_alive")

#: Appended to the token of a lease whose lock its holder holds.
_MARK = ":ofd"
#: Lease locks lie at this offset and above: far past SQLite's own lock bytes (at 1 GiB).
_BASE = 1 << 61
# ``struct flock`` (Linux): l_type, l_whence, l_start, l_len, l_pid, padded to 8 bytes.
_FLOCK = "hhqqi4x"


def _flock(kind: int, owner: str, session_id: str) -> bytes:
    key = f"{owner}\x1f{session_id}".encode()
    offset = _BASE + int.from_bytes(hashlib.blake2b(key, digest_size=7).digest())
    return struct.pack(_FLOCK, kind, os.SEEK_SET, offset, 1, 0)


class LeaseLocks:
    """The lease locks a store holds on its database file, one per lease it holds.

    :param path: the database file.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        self._held: set[tuple[str, str]] = set()

    def hold(self, owner: str, session_id: str) -> str:
        """The token to store for ``owner``'s lease on ``session_id``: marked once its lock is
        held (taken now, before the lease names it), else ``owner`` as it is (no such locks
        here, or the file cannot be opened: the token is then judged by its process)."""
        if (owner, session_id) in self._held:
            return owner + _MARK
        if _SETLK is None:
            return owner
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            fcntl.fcntl(self._fd, _SETLK, _flock(fcntl.F_RDLCK, owner, session_id))
        except OSError:
            return owner
        self._held.add((owner, session_id))
        return owner + _MARK

    def stored(self, owner: str, session_id: str) -> str:
        """The token ``owner``'s lease on ``session_id`` was written with (taking no lock)."""
        return owner + _MARK if (owner, session_id) in self._held else owner

    def let_go(self, owner: str, session_id: str) -> None:
        """Let the lease's lock go (the lease is released, or its release failed: either way
        its token names a lease no one holds)."""
        if (owner, session_id) not in self._held:
            return
        self._held.discard((owner, session_id))
        assert self._fd is not None and _SETLK is not None
        try:
            fcntl.fcntl(self._fd, _SETLK, _flock(fcntl.F_UNLCK, owner, session_id))
        except OSError:
            # Cannot happen for a lock this descriptor holds; should it, the lease stays
            # held until the store closes (the descriptor with it).
            self._held.add((owner, session_id))

    def close(self) -> None:
        """Let every lock go: leases still naming these tokens may be taken over at once."""
        fd, self._fd, self._held = self._fd, None, set()
        if fd is not None:
            os.close(fd)


def holder_alive(connection: sqlite3.Connection, holder: str, session_id: str) -> bool:
    """Whether the store named by the lease token ``holder`` still holds ``session_id``'s
    lease. A marked token of another process of this host: while its lock is held on the
    database ``connection`` has open (a kernel fact on the file, so it holds across PID
    namespaces too). Any other token: :func:`owner_alive` (by its process, or by this
    process's open stores)."""
    owner = holder.removesuffix(_MARK)
    if owner == holder or _GETLK is None:
        return owner_alive(owner)
    host, _, rest = owner.partition(":")
    if host != socket.gethostname() or rest.partition(":")[0] == str(os.getpid()):
        # Another host's locks are not seen here; this process knows its own stores.
        return owner_alive(owner)
    locked = _locked(_database_path(connection), owner, session_id)
    return owner_alive(owner) if locked is None else locked


def _database_path(connection: sqlite3.Connection) -> str:
    for _, name, path in connection.execute("PRAGMA database_list"):
        if name == "main":
            return str(path)
    return ""


def _locked(path: str, owner: str, session_id: str) -> bool | None:
    """Whether some open file description holds ``owner``'s lock of ``session_id`` on
    ``path``; ``None`` when that cannot be told (the file cannot be opened or asked)."""
    assert _GETLK is not None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        answer = fcntl.fcntl(fd, _GETLK, _flock(fcntl.F_WRLCK, owner, session_id))
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
            return holder is not None and holder_alive(db, holder, session_id)
        finally:
            db.close()
    except sqlite3.Error:
        return False
