"""Deleting a session from SQLite: its record, its events, its snapshot, and the bytes of the
attachments it referenced that no other stored event mentions, in one transaction."""

from __future__ import annotations

import sqlite3

from .._base import delete_refused
from ._attachments import forget_attachments
from ._liveness import holder_alive
from ._ops import stored_holder
from ._snapshots import delete_snapshot
from ._transaction import transaction

__all__ = ("delete_session",)


def delete_session(
    connection: sqlite3.Connection, session_id: str, owner: str, force: bool
) -> None:
    """Delete a session and its events; refuse while another live writer holds its lease
    (unless ``force``: that writer is then fenced at its next write)."""
    with transaction(connection):
        holder = stored_holder(connection, session_id)
        if (
            not force
            and holder is not None
            and holder != owner
            and holder_alive(connection, holder, session_id)
        ):
            raise delete_refused(session_id, holder)
        # Before the events go: they say which attachments this session referenced.
        forget_attachments(connection, session_id)
        connection.execute("DELETE FROM {p}sessions WHERE id = ?", (session_id,))
        connection.execute("DELETE FROM {p}events WHERE session_id = ?", (session_id,))
        delete_snapshot(connection, session_id)
