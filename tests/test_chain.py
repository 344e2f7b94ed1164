"""The hash chain, format 2: bound to its session, covering every stored column; format 1
sessions keep their own rule; forks get a chain of their own."""

from __future__ import annotations

import shutil
import sqlite3
from hashlib import blake2b
from pathlib import Path
from typing import Any

import pytest

from eventlog import (
    APPEND,
    CorruptLogError,
    Event,
    Message,
    Replace,
    StepEnd,
    StepStart,
    TurnEnd,
    TurnStart,
    UnsupportedFormatError,
    UserMessage,
    open_store,
)
from eventlog._codec import make_row, make_rows
from eventlog.stores import MemoryData, chain_hash
from tests.fixtures.make_format1 import fixture_types

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).parent / "fixtures"
#: The format-2 hash of ``turn/start {"turn":1}`` at seq 0, time 1700000000000, in session
#: ``golden``. Pinned: the format is versioned, a change of it is a new format.
GOLDEN = "0218aa84c6eff562af9dd9410def8475e767e0ef7f0ee1f4b10a04f5aefec2a625"


def sql(path: Path, statement: str, *params: object) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as db:
        found = db.execute(statement, params).fetchall()
    db.close()
    return found


async def test_the_format2_hash_of_one_event_is_pinned() -> None:
    disk = MemoryData()
    async with open_store("memory:", data=disk) as store:
        session = await store.create(session_id="golden")
        session.append("turn/start", TurnStart(turn=1), time=1_700_000_000_000)
        await session.flush()
    (row,) = disk.rows["golden"]
    assert row.data == b'{"turn":1}'
    assert row.hash.hex() == GOLDEN
    # What the value is made of, spelled out: the version byte, then blake2b over the domain,
    # the session id, the previous hash (none) and every column.
    body = (
        b"eventlog chain 2\x1fgolden\x1f" + b"0\x1fturn/start\x1f1700000000000\x1f\x1f[]\x1f0\x1f"
    )
    assert row.hash == b"\x02" + blake2b(body + row.data, digest_size=32).digest()


async def _two_turns(url: str, session_id: str) -> None:
    async with open_store(url) as store:
        session = await store.create(session_id=session_id)
        for turn in (1, 2):
            session.append("turn/start", TurnStart(turn=turn), time=100)
            session.append(
                "user/message",
                UserMessage(message=Message.user("hello", id=f"m{turn}")),
                surface=APPEND,
                time=100,
            )
            session.append("step/start", StepStart(turn=turn, step=1), time=100)
            session.append("step/end", StepEnd(turn=turn, step=1), time=100)
            session.append("turn/end", TurnEnd(turn=turn, reason="completed"), time=100)
        await session.flush()


async def _open_fails_at(url: str, session_id: str) -> CorruptLogError:
    async with open_store(url) as store:
        with pytest.raises(CorruptLogError) as caught:
            await store.open(session_id)
    return caught.value


async def test_an_event_copied_from_another_session_does_not_verify(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    url = f"sqlite:///{path}"
    # Two sessions with the very same events, byte for byte ...
    await _two_turns(url, "a")
    await _two_turns(url, "b")
    assert sql(path, "SELECT data FROM events WHERE session_id = 'a'") == sql(
        path, "SELECT data FROM events WHERE session_id = 'b'"
    )
    # ... have different hashes: each chain binds its session id.
    hashes = sql(path, "SELECT hash FROM events WHERE seq = 0 ORDER BY session_id")
    assert hashes[0] != hashes[1]
    # Event 0 of a copied over event 0 of b: b's open names seq 0.
    sql(
        path,
        "UPDATE events SET hash = (SELECT hash FROM events WHERE session_id = 'a' AND seq = 0) "
        "WHERE session_id = 'b' AND seq = 0",
    )
    fault = await _open_fails_at(url, "b")
    assert (fault.seq, "hash mismatch" in fault.message) == (0, True)


# Each case alters one stored column of one row so that the row still decodes (the failure
# can only come from the chain), and names the seq that must be reported.
TAMPERS = [
    pytest.param("UPDATE events SET type = 'step/end' WHERE seq = 2", 2, id="type"),
    pytest.param("UPDATE events SET time = time + 1 WHERE seq = 3", 3, id="time"),
    pytest.param("UPDATE events SET surface = NULL WHERE seq = 6", 6, id="surface"),
    pytest.param("UPDATE events SET sources = '[0]' WHERE seq = 4", 4, id="sources"),
    pytest.param("UPDATE events SET ignorable = 1 WHERE seq = 5", 5, id="ignorable"),
    pytest.param(
        "UPDATE events SET data = replace(data, 'hello', 'hellp') WHERE seq = 1", 1, id="data"
    ),
    pytest.param(
        "UPDATE events SET data = replace(data, '\"turn\":2', '\"turn\":3') WHERE seq = 5",
        5,
        id="data-number",
    ),
]


@pytest.mark.parametrize(("statement", "seq"), TAMPERS)
async def test_altering_any_stored_column_is_caught_at_its_seq(
    tmp_path: Path, statement: str, seq: int
) -> None:
    path = tmp_path / "s.db"
    url = f"sqlite:///{path}"
    await _two_turns(url, "s")
    changed = sql(path, statement + " RETURNING seq") if "RETURNING" not in statement else []
    assert changed == [(seq,)]
    fault = await _open_fails_at(url, "s")
    assert fault.seq == seq
    assert f"session 's', seq {seq}: hash mismatch" in fault.message


async def test_a_flipped_hash_byte_is_caught_at_its_seq(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    url = f"sqlite:///{path}"
    await _two_turns(url, "s")
    digest = sql(path, "SELECT hash FROM events WHERE seq = 7")[0][0]
    sql(
        path,
        "UPDATE events SET hash = ? WHERE seq = 7",
        digest[:10] + bytes([digest[10] ^ 1]) + digest[11:],
    )
    fault = await _open_fails_at(url, "s")
    assert (fault.seq, "seq 7: hash mismatch" in fault.message) == (7, True)


async def test_a_row_of_the_other_chain_format_is_damage_at_its_seq(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    url = f"sqlite:///{path}"
    await _two_turns(url, "s")
    # Row 3 re-hashed under format 1 against its true predecessor: a well-made hash of the
    # wrong format inside a format-2 chain.
    prev = sql(path, "SELECT hash FROM events WHERE seq = 2")[0][0]
    row3 = sql(
        path, "SELECT type, time, surface, sources, ignorable, data FROM events WHERE seq = 3"
    )
    type_, time, surface, sources, ignorable, data = row3[0]
    v1 = chain_hash(prev, 3, type_, time, surface, sources, bool(ignorable), data.encode())
    sql(path, "UPDATE events SET hash = ? WHERE seq = 3", v1)
    fault = await _open_fails_at(url, "s")
    assert fault.seq == 3
    assert "its hash is of chain format 1, the session's is 2" in fault.message


async def test_a_newer_chain_format_is_refused_as_unsupported(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    url = f"sqlite:///{path}"
    await _two_turns(url, "s")
    first = sql(path, "SELECT hash FROM events WHERE seq = 0")[0][0]
    sql(path, "UPDATE events SET hash = ? WHERE seq = 0", b"\x03" + first[1:])
    async with open_store(url) as store:
        with pytest.raises(UnsupportedFormatError, match="seq 0: hash chain format 3 is newer"):
            await store.open("s")


async def test_format1_sessions_stay_format1_and_new_ones_are_format2(tmp_path: Path) -> None:
    path = Path(shutil.copy(FIXTURES / "format1.db", tmp_path / "f.db"))
    url = f"sqlite:///{path}"
    async with open_store(url, types=fixture_types()) as store:
        # A format-1 session written to today: its new events keep its own format ...
        old = await store.open("hand-made")
        old.append("turn/start", TurnStart(turn=2))
        old.append("turn/end", TurnEnd(turn=2, reason="completed"))
        await old.aclose()
        # ... a new session is format 2 ...
        new = await store.create(session_id="new")
        new.append("turn/start", TurnStart(turn=1))
        await new.aclose()
        # ... and so is a fork of a format-1 session: its chain is its own.
        child = await store.fork("agent-run", 15)
        child_id = child.id
        await child.aclose()
    lengths = dict(
        sql(path, "SELECT session_id, group_concat(DISTINCT length(hash)) FROM events GROUP BY 1")
    )
    assert lengths["hand-made"] == "32"
    assert lengths["agent-run"] == "32"
    assert lengths["new"] == "33"
    assert lengths[child_id] == "33"
    async with open_store(url, types=fixture_types()) as store:
        # Every one of them reopens and verifies, each under its own rule.
        for session_id in ("hand-made", "agent-run", "new", child_id):
            session = await store.open(session_id)
            await session.aclose()
        reopened = await store.open(child_id)
        parent = await store.open("agent-run")
        assert [e.data for e in await reopened.events()][:16] == [
            e.data for e in await parent.events()
        ][:16]


@pytest.mark.parametrize("session_id", ["s", None], ids=["format 2", "format 1"])
def test_rows_built_a_round_at_a_time_are_the_rows_built_one_by_one(session_id: str | None) -> None:
    """The writer's one-pass row building chains exactly as ``make_row`` does, for every kind
    of envelope, and stops before an event no store can hold."""
    events = [
        Event(seq=0, type="user/message", time=5, data=None, surface=APPEND),
        Event(seq=1, type="app/note", time=6, data=None, ignorable=True),
        Event(seq=2, type="app/summary", time=7, data=None, surface=Replace(0, 2), sources=(0, 1)),
        Event(seq=3, type="app/note", time=8, data=None, sources=(2,)),
        Event(seq=4, type="app/note", time=2**63, data=None),
    ]
    items = [(event, f'{{"n":{event.seq}}}'.encode()) for event in events]
    prev = b"\x02" + bytes(32) if session_id else bytes(32)
    expected, hash_ = [], prev
    for e, data in items[:4]:
        row = make_row(
            hash_, e.seq, e.type, e.time, e.surface, e.sources, e.ignorable, data, session_id
        )
        expected.append(row)
        hash_ = row.hash
    assert make_rows(prev, items, session_id) == expected
    assert make_rows(prev, items[:2], session_id) == expected[:2]
    assert make_rows(prev, [], session_id) == []
