"""How the PostgreSQL backend writes a round: one statement for every session's rows, and the
recognition of a round that committed although its reply was lost."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..._codec import Row
from .._batch import Batch

__all__ = ("landed_rest", "row_columns", "write_round")


def row_columns(rows: Sequence[Row]) -> tuple[list[Any], ...]:
    """The rows as column arrays, in the order the statements take them."""
    return (
        [r.seq for r in rows],
        [r.type for r in rows],
        [r.time for r in rows],
        [r.surface for r in rows],
        [r.sources for r in rows],
        [r.ignorable for r in rows],
        [r.data.decode() for r in rows],
        [r.hash for r in rows],
    )


async def write_round(
    conn: Any,
    statement: str,
    batches: Sequence[Batch],
    owner: Callable[[str], str],
    lease_ttl: float,
    channel: str | None,
) -> set[str]:
    """Write ``batches`` with the store's write ``statement`` (one transaction); return the
    sessions in conflict (head moved or lease lost: nothing of theirs written). ``channel``:
    notify it in the transaction (``None``: the caller notifies)."""
    rows = [row for b in batches for row in b.rows]
    conflicts, _ = await conn.fetchrow(
        statement,
        [b.session_id for b in batches],
        [owner(b.session_id) for b in batches],
        [b.expected_head for b in batches],
        [b.rows[-1].seq for b in batches],
        lease_ttl,
        [b.session_id for b in batches for _ in b.rows],
        *row_columns(rows),
        channel,
    )
    return set(conflicts)


async def landed_rest(
    conn: Any,
    statement: str,
    batches: Sequence[Batch],
    conflicts: set[str],
    owner: Callable[[str], str],
) -> tuple[set[str], list[Batch]]:
    """Of the sessions in conflict, those whose earlier round committed although its reply
    was lost (the stored head, read with ``statement``, lies inside the batch and its hash is
    ours): they are not conflicts. Returns them, and the rest of their batches (still to be
    written)."""
    doubtful = [b for b in batches if b.session_id in conflicts]
    stored = {
        sid: (head, digest)
        for sid, head, digest in await conn.fetch(
            statement,
            [b.session_id for b in doubtful],
            [owner(b.session_id) for b in doubtful],
        )
    }
    landed: set[str] = set()
    rest: list[Batch] = []
    for batch in doubtful:
        head, digest = stored.get(batch.session_id, (None, None))
        first, last = batch.rows[0].seq, batch.rows[-1].seq
        if head is None or not first <= head <= last or batch.rows[head - first].hash != digest:
            continue
        landed.add(batch.session_id)
        if head < last:
            rest.append(Batch(batch.session_id, head, batch.rows[head - first + 1 :]))
    return landed, rest
