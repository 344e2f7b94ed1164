"""Writer-lease owner tokens and whether their owner may still write.

A token is ``host:pid:random``, one per store. Every backend records it as the session's
writer. Whether a token's owner is gone is answered here once, for every backend:

- a token of another host: alive (its processes cannot be seen from here; PostgreSQL leases
  expire on the server's clock instead);
- a token of this host and another process: alive while that process runs (a zombie counts as
  dead: a killed child its parent has not reaped yet still answers ``kill(pid, 0)``);
- a token of this process: alive while the store that made it is open. A store that closed
  without releasing a lease (its last write failed, and releasing failed with it, e.g. on a
  full disk) leaves a token no one holds any more: the next store takes the lease over at once.
"""

from __future__ import annotations

import os
import socket
import uuid

__all__ = ("new_owner", "owner_alive", "retire_owner")

#: Tokens of this process's stores that are still open.
_live: set[str] = set()


def new_owner() -> str:
    """A fresh owner token for a store of this process; alive until :func:`retire_owner`."""
    token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
    _live.add(token)
    return token


def retire_owner(token: str) -> None:
    """The store holding ``token`` closed: leases it still names may be taken over."""
    _live.discard(token)


def owner_alive(owner: str) -> bool:
    """Whether the store named by a lease token may still write (see the module docstring)."""
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return True
    pid = int(pid_text)
    if pid == os.getpid():
        return owner in _live
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True  # it exists and belongs to another user
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] == b"Z"
    except (OSError, IndexError):
        return False
