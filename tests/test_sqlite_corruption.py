"""The corruption matrix on SQLite: every column of ``events`` and ``sessions`` altered,
rows deleted, duplicated and swapped, the file truncated, its header overwritten. Each case is
detected on ``open`` with the exact seq, or it is one the docs list as undetectable
(``docs/integrity.md``, checked here too) and the test shows what a reader then sees.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from eventlog import (
    APPEND,
    CorruptLogError,
    EventLogError,
    Message,
    Replace,
    Session,
    SessionBusyError,
    StepEnd,
    StepStart,
    TurnEnd,
    TurnStart,
    UserMessage,
    open_store,
)
from eventlog.testing import flip_a_letter

pytestmark = pytest.mark.anyio

DOCS = Path(__file__).resolve().parent.parent / "docs" / "integrity.md"

#: The log every case damages (seq: type): a turn, then a checkpoint message that replaces the
#: first one (a surface "replace" with sources), then a last turn.
#:  0 turn/start  1 user/message (append)  2 step/start  3 step/end  4 turn/end
#:  5 user/message (replace 1..1, sources [1])  6 turn/start  7 user/message  8 turn/end
LAST = 8


def say(
    session: Session, text: str, surface: Replace | None = None, sources: tuple[int, ...] = ()
) -> None:
    session.append(
        "user/message",
        UserMessage(message=Message.user(text)),
        surface=APPEND if surface is None else surface,
        sources=sources,
    )


async def write_log(path: Path) -> None:
    async with open_store(f"sqlite:///{path}") as store:
        s = await store.create(session_id="s", metadata={"owner": "ops"})
        s.append("turn/start", TurnStart(turn=1))
        say(s, "hello")
        s.append("step/start", StepStart(turn=1, step=1))
        s.append("step/end", StepEnd(turn=1, step=1))
        s.append("turn/end", TurnEnd(turn=1, reason="completed"))
        say(s, "summary", surface=Replace(1, 1), sources=(1,))
        s.append("turn/start", TurnStart(turn=2))
        say(s, "again")
        s.append("turn/end", TurnEnd(turn=2, reason="completed"))
        await s.aclose()
        await (await store.create(session_id="other")).aclose()


def sql(path: Path, statement: str, *params: object) -> None:
    with sqlite3.connect(path) as db:
        db.execute(statement, params)
    db.close()


def blob(path: Path, column: str, seq: int) -> bytes:
    with sqlite3.connect(path) as db:
        (value,) = db.execute(
            f"SELECT CAST({column} AS BLOB) FROM events WHERE session_id = 's' AND seq = ?",
            (seq,),
        ).fetchone()
    db.close()
    return bytes(value)


def set_bytes(path: Path, column: str, seq: int, value: bytes, *, as_text: bool = True) -> None:
    cast = "CAST(? AS TEXT)" if as_text else "?"
    sql(path, f"UPDATE events SET {column} = {cast} WHERE session_id = 's' AND seq = ?", value, seq)


def flip_hash(path: Path) -> None:
    digest = bytearray(blob(path, "hash", 4))
    digest[0] ^= 0x01
    set_bytes(path, "hash", 4, bytes(digest), as_text=False)


def bad_utf8(column: str, seq: int) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        value = bytearray(blob(path, column, seq))
        value[1] = 0xFF  # never valid in UTF-8
        set_bytes(path, column, seq, bytes(value))

    return damage


def swap_rows(path: Path) -> None:
    # Rows 2 and 3 trade places (their seqs swapped): each still has its own hash.
    sql(path, "UPDATE events SET seq = -1 WHERE session_id = 's' AND seq = 2")
    sql(path, "UPDATE events SET seq = 2 WHERE session_id = 's' AND seq = 3")
    sql(path, "UPDATE events SET seq = 3 WHERE session_id = 's' AND seq = -1")


def copy_row(seq: int, to: int, *, move_head: bool) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        sql(
            path,
            "INSERT INTO events SELECT session_id, ?, type, time, surface, sources, ignorable, "
            "data, hash FROM events WHERE session_id = 's' AND seq = ?",
            to,
            seq,
        )
        if move_head:
            sql(path, "UPDATE sessions SET head = ? WHERE id = 's'", to)

    return damage


def statement(text: str, *params: object) -> Callable[[Path], None]:
    return lambda path: sql(path, text, *params)


#: (case, damage, seq that open names). Every column of ``events``, and of ``sessions`` where
#: it is covered; rows deleted, duplicated and swapped.
DETECTED: list[tuple[str, Callable[[Path], None], int]] = [
    # events.session_id: the row moves to another session; here a seq is missing.
    ("events.session_id", statement("UPDATE events SET session_id = 'x' WHERE seq = 3"), 3),
    ("events.seq", statement("UPDATE events SET seq = 100 WHERE session_id = 's' AND seq = 3"), 3),
    # A type with the same payload shape, so the row still decodes: only the chain tells.
    (
        "events.type",
        statement("UPDATE events SET type = 'step/end' WHERE session_id = 's' AND seq = 2"),
        2,
    ),
    ("events.time", statement("UPDATE events SET time = time + 1 WHERE seq = 2"), 2),
    ("events.time-real", statement("UPDATE events SET time = time + 0.5 WHERE seq = 2"), 2),
    ("events.time-text", statement("UPDATE events SET time = 'noon' WHERE seq = 2"), 2),
    ("events.surface-dropped", statement("UPDATE events SET surface = NULL WHERE seq = 7"), 7),
    ("events.surface-added", statement("UPDATE events SET surface = 'append' WHERE seq = 6"), 6),
    (
        "events.surface-span",
        statement("UPDATE events SET surface = 'replace:1:2' WHERE seq = 5"),
        5,
    ),
    ("events.sources", statement("UPDATE events SET sources = '[0]' WHERE seq = 5"), 5),
    ("events.ignorable", statement("UPDATE events SET ignorable = 1 WHERE seq = 6"), 6),
    ("events.data", lambda p: set_bytes(p, "data", 7, flip_a_letter(blob(p, "data", 7))), 7),
    ("events.hash", flip_hash, 4),
    ("events.hash-null-bytes", statement("UPDATE events SET hash = x'' WHERE seq = 4"), 4),
    ("events.hash-text", statement("UPDATE events SET hash = 'digest' WHERE seq = 4"), 4),
    ("events.type-utf8", bad_utf8("type", 3), 3),
    ("events.surface-utf8", bad_utf8("surface", 7), 7),
    ("events.sources-utf8", bad_utf8("sources", 5), 5),
    ("events.data-utf8", bad_utf8("data", 6), 6),
    ("row-deleted-middle", statement("DELETE FROM events WHERE session_id = 's' AND seq = 4"), 4),
    ("row-deleted-last", statement(f"DELETE FROM events WHERE seq = {LAST}"), LAST),
    ("row-duplicated-past-head", copy_row(3, LAST + 1, move_head=False), LAST + 1),
    ("row-duplicated-with-head", copy_row(3, LAST + 1, move_head=True), LAST + 1),
    ("row-duplicated-far", copy_row(3, 50, move_head=True), LAST + 1),
    ("rows-swapped", swap_rows, 2),
    ("sessions.head-raised", statement("UPDATE sessions SET head = 20 WHERE id = 's'"), LAST + 1),
    ("sessions.head-lowered", statement("UPDATE sessions SET head = 3 WHERE id = 's'"), 4),
]


@pytest.mark.parametrize(("damage", "seq"), [c[1:] for c in DETECTED], ids=[c[0] for c in DETECTED])
async def test_damage_is_found_on_open_at_its_seq(
    tmp_path: Path, damage: Callable[[Path], None], seq: int
) -> None:
    path = tmp_path / "s.db"
    await write_log(path)
    damage(path)
    async with open_store(f"sqlite:///{path}") as store:
        # a full open names the first seq in doubt (the log ends in a snapshot, which the
        # default open would start from, reading none of the rows before it)...
        with pytest.raises(CorruptLogError) as caught:
            await store.open("s", verify="full")
        assert caught.value.seq == seq
        assert f"session 's', seq {seq}:" in caught.value.message
        # ...salvage returns the events before it (at most the stored head's worth)...
        salvaged = await store.open("s", salvage=True)
        assert salvaged.head == min(seq - 1, LAST)
        assert salvaged.salvage_fault is not None
        # ...and the other session of the file is untouched.
        assert (await store.open("other")).head == -1


async def test_a_renamed_session_is_missing_all_its_events(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    await write_log(path)
    sql(path, "UPDATE sessions SET id = 'renamed' WHERE id = 's'")
    async with open_store(f"sqlite:///{path}") as store:
        # sessions.id: the record no longer matches its events, from seq 0.
        with pytest.raises(CorruptLogError) as caught:
            await store.open("renamed")
        assert caught.value.seq == 0


@pytest.mark.parametrize(
    "damage",
    [
        "UPDATE sessions SET metadata = '{not json' WHERE id = 's'",
        "UPDATE sessions SET metadata = CAST(x'7b22ff223a317d' AS TEXT) WHERE id = 's'",
        "UPDATE sessions SET parent_id = CAST(x'61ff' AS TEXT) WHERE id = 's'",
        "UPDATE sessions SET head = 'many' WHERE id = 's'",
    ],
    ids=["metadata-json", "metadata-utf8", "parent-utf8", "head-text"],
)
async def test_a_damaged_session_record_is_corrupt_and_listed_with_its_error(
    tmp_path: Path, damage: str
) -> None:
    path = tmp_path / "s.db"
    await write_log(path)
    sql(path, damage)
    async with open_store(f"sqlite:///{path}") as store:
        # The record has no seq to name: the error names the session and the table.
        with pytest.raises(CorruptLogError, match="session 's': its record in the sessions"):
            await store.open("s")
        # Listing survives it: the damaged session is listed with its error, the rest fine.
        infos = {info.id: info for info in await store.list()}
        assert infos["other"].error is None
        if "head" not in damage:
            assert infos["s"].error is not None


# -- the cases docs/integrity.md lists as undetectable ------------------------------------------

UNDETECTED = {
    "sessions.created_at": "UPDATE sessions SET created_at = 1 WHERE id = 's'",
    "sessions.parent_id": "UPDATE sessions SET parent_id = 'other' WHERE id = 's'",
    "sessions.fork_seq": "UPDATE sessions SET fork_seq = 3 WHERE id = 's'",
    "sessions.metadata": "UPDATE sessions SET metadata = '{\"owner\": \"mallory\"}' WHERE id = 's'",
    "events.ignorable-nonzero": "UPDATE events SET ignorable = 2 WHERE seq = 2",
    "truncated-tail": "DELETE FROM events WHERE session_id = 's' AND seq > 5",
}


@pytest.mark.parametrize("case", sorted(UNDETECTED))
async def test_undetectable_damage_is_documented(tmp_path: Path, case: str) -> None:
    path = tmp_path / "s.db"
    await write_log(path)
    damage = UNDETECTED[case]
    if case == "truncated-tail":
        # A cut log whose head was cut with it (as a rollback of the last commits would).
        damage += "; UPDATE sessions SET head = 5 WHERE id = 's'"
    with sqlite3.connect(path) as db:
        db.executescript(damage)
    db.close()
    async with open_store(f"sqlite:///{path}") as store:
        session = await store.open("s")  # opens: nothing in the chain covers it
        assert session.head == (5 if case == "truncated-tail" else LAST)
        await session.aclose()
    # The docs say so, and why.
    assert f"`{case}`" in DOCS.read_text()


async def test_the_writer_column_is_a_lease_not_data(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    await write_log(path)
    # Edited to a name no process of this host has: it counts as a live writer elsewhere.
    sql(path, "UPDATE sessions SET writer = 'garbage' WHERE id = 's'")
    async with open_store(f"sqlite:///{path}") as store:
        with pytest.raises(SessionBusyError, match="open for writing by garbage"):
            await store.open("s")
        # Reading needs no lease.
        assert (await store.open("s", salvage=True)).salvage_fault is None
    # Bytes that are not UTF-8 are shown escaped, and count as a writer elsewhere too.
    sql(path, "UPDATE sessions SET writer = CAST(x'67ff' AS TEXT) WHERE id = 's'")
    async with open_store(f"sqlite:///{path}") as store:
        with pytest.raises(SessionBusyError, match=r"open for writing by g\\xff"):
            await store.open("s")
        with pytest.raises(SessionBusyError, match="not deleted"):
            await store.delete("s")
    assert "`sessions.writer`" in DOCS.read_text()


# -- the file itself ----------------------------------------------------------------------------


async def test_a_garbage_header_is_refused_as_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    await write_log(path)
    with path.open("r+b") as file:
        file.write(b"this is not a database, it was overwritten" * 3)
    with pytest.raises(CorruptLogError, match="the file is damaged or is not an eventlog"):
        async with open_store(f"sqlite:///{path}"):
            pass


async def test_a_truncated_file_is_refused_as_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    await write_log(path)
    # Bigger than a page so the events table has pages to lose; checkpointed into the file.
    async with open_store(f"sqlite:///{path}") as store:
        big = await store.create(session_id="big")
        for i in range(300):
            say(big, f"message {i} " + "x" * 200)
        await big.aclose()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    size = path.stat().st_size
    with path.open("r+b") as file:
        file.truncate(size // 2)
    # SQLite cannot tell which rows the lost pages held: no seq, but never a silent open.
    with pytest.raises(EventLogError) as caught:
        async with open_store(f"sqlite:///{path}") as store:
            await store.open("big")
    assert isinstance(caught.value, CorruptLogError), caught.value
