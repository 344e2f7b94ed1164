"""Writer leases across hosts: a holder and an expiry on the server's clock.

Hosts cannot see each other's processes, so a lease (``sessions.writer`` and
``sessions.lease_until``) lives ``ttl`` seconds unless renewed. The store holding it renews
all its leases in one statement every ``ttl / 3`` seconds (and every write round renews the
leases it writes for). A host that died stops renewing; once its lease has expired another
host may take the session over. A host that only paused (a long GC, a suspended VM) and wakes
up after a takeover is fenced by the write round, which checks the lease is still its own.

Driver errors propagate from here; the backend translates them.
"""

from __future__ import annotations

from typing import Any

from ..._errors import SessionBusyError
from .._base import session_not_found
from .._owners import owner_alive
from ._sql import Statements

__all__ = ("Leases",)


class Leases:
    """The leases one store holds.

    :param sql: the store's statements.
    :param ttl: seconds a lease lives without renewal.
    """

    def __init__(self, sql: Statements, ttl: float) -> None:
        self._sql = sql
        self.ttl = ttl
        #: session id -> owner token, for every lease this store holds.
        self.held: dict[str, str] = {}

    def owner(self, session_id: str) -> str:
        """The owner token this store writes ``session_id`` as (empty when it holds none)."""
        return self.held.get(session_id, "")

    async def acquire(self, pool: Any, session_id: str, owner: str) -> None:
        """Take the lease: free, already ours, expired, or held by an owner known to be gone
        (a process of this host that ended, or a closed store of this process): that one is
        taken over at once instead of after its expiry.

        :raises SessionBusyError: another owner's lease has not expired.
        :raises SessionNotFoundError: no such session.
        """
        sql = self._sql
        for _ in range(3):
            if await pool.fetchval(sql.acquire_lease, session_id, owner, self.ttl):
                self.held[session_id] = owner
                return
            holder = await pool.fetchrow(sql.lease_holder, session_id)
            if holder is None:
                raise session_not_found(session_id)
            writer, remaining = holder
            if writer is not None and remaining is not None and remaining > 0:
                if owner_alive(writer):
                    raise _busy(session_id, writer, remaining)
                if await pool.fetchval(sql.take_lease, session_id, owner, writer, self.ttl):
                    self.held[session_id] = owner
                    return
            # Released or expired between the two statements: try again.
        raise _busy(session_id, "another writer", self.ttl)

    async def release(self, pool: Any, session_id: str, owner: str) -> None:
        """Give the lease up if ``owner`` holds it."""
        if self.held.get(session_id) == owner:
            del self.held[session_id]
        await pool.execute(self._sql.release_lease, session_id, owner)

    async def renew(self, pool: Any) -> set[str]:
        """Extend every held lease; return the sessions whose lease another host took."""
        if not self.held:
            return set()
        held = dict(self.held)
        renewed = await pool.fetch(
            self._sql.renew_leases, list(held), list(held.values()), self.ttl
        )
        # A lease released while the renewal ran was not taken: only those still held count.
        missing = set(held).difference(r[0] for r in renewed)
        return {sid for sid in missing if self.held.get(sid) == held[sid]}


def _busy(session_id: str, writer: str, remaining: float) -> SessionBusyError:
    return SessionBusyError(
        f"session {session_id!r} is open for writing by {writer} "
        f"(its lease runs {remaining:.1f} s more unless renewed)",
        session_id=session_id,
        hint="close the other writer, or wait for its lease to expire",
    )
