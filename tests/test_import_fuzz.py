"""Import fuzzing through both formats: hostile exports (re-chained, so they reach the commit
rules, or damaged byte by byte) and hostile dsh logs.

Every run of ``eventlog import`` ends one of three ways, and the test says which one each
mutation must end in: imported cleanly (exit 0); imported with departures, each reported on a
line naming file:line and field (exit 1, 0 with ``--accept-departures``); or refused with one
typed line naming file:line and field (exit 2), the database file byte-identical. Never a
traceback: ``main`` runs in this process, so one would fail the test.
"""

from __future__ import annotations

import atexit
import base64
import json
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from eventlog import (
    APPEND,
    ImagePart,
    ImportRefusedError,
    Message,
    StepEnd,
    StepStart,
    TextPart,
    TurnEnd,
    TurnStart,
    UserMessage,
    open_store,
)
from eventlog.stores import GENESIS_HASH, chain_hash, check_import, rechain

from .cli_fixtures import Note, cli_types, run_main, url_of

SID = "fuzzed"
#: A deeper nesting than a commit allows (64), shallow enough to be read.
DEEP = 100
#: Deeper than any decoder's stack reaches.
ABYSS = 5000
#: Hundreds of levels: read by the decoder, then deep on the stack of whatever handles it.
NEAR = 800


# -- the base export: a real session with an app event and an attachment ----------------------


async def _write_base(url: str) -> None:
    async with open_store(url, types=cli_types()) as store:
        digest = await store.put_attachment(b"\x89PNG fake image bytes")
        session = await store.create(SID, metadata={"origin": "fuzz", "tags": ["a", "b"]})
        session.append("turn/start", TurnStart(turn=1))
        session.append("step/start", StepStart(turn=1, step=1))
        image = ImagePart(attachment=digest, media_type="image/png")
        message = Message(id="m1", role="user", content=(TextPart(text="look"), image))
        session.append("user/message", UserMessage(message=message), surface=APPEND)
        session.append("app/note", Note(text="an extension the command does not know"))
        session.append("step/end", StepEnd(turn=1, step=1))
        session.append("turn/end", TurnEnd(turn=1, reason="completed"))
        await session.aclose()


Lines = list[dict[str, Any]]
_BASE: Lines = []


def base_lines() -> Lines:
    """The export of the base session, one dict per line (built once)."""
    if not _BASE:
        with tempfile.TemporaryDirectory() as tmp:
            db, out = Path(tmp) / "base.db", Path(tmp) / "base.jsonl"
            anyio.run(_write_base, url_of(db))
            assert run_main("export", SID, "-o", str(out), db=db).returncode == 0
            _BASE.extend(json.loads(text) for text in out.read_text().splitlines())
    copy: Lines = json.loads(json.dumps(_BASE))  # a deep copy to mutate
    return copy


def chained(lines: list[dict[str, Any]]) -> bytes:
    """``lines`` as an export file whose hash chain verifies (format 2, under each session's
    id), so a mutation reaches the rules beyond the chain."""
    out, prev, sid = [], GENESIS_HASH, ""
    for item in lines:
        if item.get("kind") == "session":
            prev, sid = GENESIS_HASH, item["id"] if isinstance(item["id"], str) else ""
        if item.get("kind") == "event":
            data = raw_json(item["data"])
            sources = raw_json(item["sources"]).decode()
            digest = chain_hash(
                prev,
                item["seq"],
                item["type"],
                item["time"],
                item["surface"],
                sources,
                item["ignorable"],
                data,
                sid,
            )
            item["hash"], prev = digest.hex(), digest
        out.append(encode_line(item))
    return b"\n".join(out) + b"\n"


class Raw:
    """JSON text placed into a line verbatim (a value ``json`` cannot write: 1e999, a lone
    surrogate escape, nesting past its recursion limit)."""

    def __init__(self, text: bytes) -> None:
        self.text = text


def raw_json(value: Any) -> bytes:
    """``value`` as compact JSON, any :class:`Raw` inside it placed verbatim."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, dict):
        items = [json.dumps(k).encode() + b":" + raw_json(v) for k, v in value.items()]
        return b"{" + b",".join(items) + b"}"
    if isinstance(value, list):
        return b"[" + b",".join(raw_json(v) for v in value) + b"]"
    return json.dumps(value).encode()


def encode_line(item: dict[str, Any]) -> bytes:
    return raw_json(item)


def nested(levels: int) -> Raw:
    """An object holding ``levels`` arrays one inside the other (``levels + 1`` containers)."""
    return Raw(b'{"deep":' + b"[" * levels + b"1" + b"]" * levels + b"}")


# -- what each mutation must end in -------------------------------------------------------------


@dataclass(frozen=True)
class Mutation:
    """A change to the base export and how the import must end: ``code`` 2, refused naming
    ``field`` (None: a line no decoder reads, named by its line only); 1, imported with a
    departure of ``field``; 0, imported as it is. ``line``: where it is reported."""

    apply: Callable[[Any], None]  # changes the lines of an export or of a dsh log in place
    code: int
    field: str | None
    line: int | None


def _events(lines: Lines) -> Lines:
    return [x for x in lines if x.get("kind") == "event"]


def at(seq: int, key: str, value: Any, code: int, field: str | None) -> Mutation:
    """Set column ``key`` of event ``seq`` (on line ``seq + 2``)."""
    return Mutation(lambda lines: _events(lines)[seq].__setitem__(key, value), code, field, seq + 2)


def inside(seq: int, key: str, value: Any, code: int, field: str | None) -> Mutation:
    """Set ``key`` of the payload of event ``seq``."""
    return Mutation(
        lambda lines: _events(lines)[seq]["data"].__setitem__(key, value), code, field, seq + 2
    )


def record(key: str, value: Any, code: int, field: str | None) -> Mutation:
    """Set ``key`` of the session line (line 1)."""
    return Mutation(lambda lines: lines[0].__setitem__(key, value), code, field, 1)


def _drop_attachment(lines: Lines) -> None:
    lines[:] = [x for x in lines if x.get("kind") != "attachment"]


def _duplicate_seq(lines: Lines) -> None:
    lines.insert(3, json.loads(json.dumps(lines[2])))
    lines[0]["head"] -= 1  # the header counts the events it promises, as before


def _forked(lines: Lines) -> None:
    lines[0].update(parent_id="gone", fork_seq=1)


# Seqs of the base session: 0 turn/start, 1 step/start, 2 user/message (with the image),
# 3 app/note (an extension the command does not know), 4 step/end, 5 turn/end.
MUTATIONS: dict[str, Mutation] = {
    "negative time": at(2, "time", -5, 2, "time"),
    "time past 64 bits": at(2, "time", 2**64, 2, "time"),
    "time as a string": at(2, "time", "5", 2, "time"),
    "backwards time": at(4, "time", 1, 1, "time"),
    "source naming itself": at(2, "sources", [2], 2, "sources"),
    "source naming a later event": at(2, "sources", [4], 2, "sources"),
    "sources naming one event twice": at(2, "sources", [0, 0], 2, "sources"),
    "sources not seqs": at(2, "sources", ["a"], 2, "sources"),
    "sources not a list": at(2, "sources", {"a": 1}, 2, "sources"),
    "surface on a log event": at(0, "surface", "append", 2, "surface"),
    "no surface on a message": at(2, "surface", None, 2, "surface"),
    "surface malformed": at(2, "surface", "replace:a:b", 2, "surface"),
    "surface replacing nothing": at(2, "surface", "replace:7:9", 2, "surface"),
    "a core type marked ignorable": at(0, "ignorable", True, 2, "ignorable"),
    "an unknown type not ignorable": at(3, "ignorable", False, 2, "type"),
    "a type name no registry takes": at(3, "type", "Not A Type", 2, "type"),
    "a core payload of the wrong type": inside(0, "turn", "1", 2, "data"),
    "turns out of order": inside(0, "turn", 2, 2, "type"),
    "a message of the wrong role": Mutation(
        lambda lines: _events(lines)[2]["data"]["message"].__setitem__("role", "assistant"),
        2,
        "data",
        4,
    ),
    "payload nested too deep": at(3, "data", nested(DEEP), 2, "data"),
    "payload nested past reading": at(3, "data", nested(ABYSS), 2, None),
    "payload nested hundreds deep": at(3, "data", nested(NEAR), 2, "data"),
    "payload integer past 64 bits": inside(3, "text", 2**70, 2, "data"),
    "payload number past a float": inside(3, "text", Raw(b"1e999"), 2, "data"),
    "payload not an object": at(3, "data", [1, 2], 2, "data"),
    "a lone surrogate": inside(3, "text", Raw(b'"\\ud800"'), 2, None),
    "NaN": inside(3, "text", Raw(b"NaN"), 2, None),
    "Infinity": inside(3, "text", Raw(b"Infinity"), 2, None),
    "metadata nested too deep": record("metadata", nested(DEEP), 2, "metadata"),
    "metadata nested past reading": record("metadata", nested(ABYSS), 2, None),
    "metadata integer past 64 bits": record("metadata", {"n": 2**70}, 2, "metadata"),
    "metadata not an object": record("metadata", [1], 2, "metadata"),
    "negative created_at": record("created_at", -1, 2, "created_at"),
    "an id that is a path": record("id", "../etc", 2, "id"),
    "a parent without a fork": record("parent_id", "gone", 2, "fork_seq"),
    "a fork_seq without a parent": record("fork_seq", 1, 2, "parent_id"),
    "a fork with no session/forked event": Mutation(_forked, 2, "fork_seq", 1),
    # Line 4 holds seq 2, the user message whose image the attachment line carried.
    "a missing attachment": Mutation(_drop_attachment, 2, "attachment", 4),
    "a duplicate seq": Mutation(_duplicate_seq, 2, "seq", 4),
    "nothing changed": Mutation(lambda lines: None, 0, None, None),
}


# -- running an import and judging it ----------------------------------------------------------


async def _seed(url: str) -> None:
    async with open_store(url) as store:
        session = await store.create("bystander")
        session.append("turn/start", TurnStart(turn=1))
        await session.aclose()


_SEEDED: list[Path] = []


def seeded_db(tmp: Path) -> Path:
    """A database that already holds a session (so "byte-identical" is about a real file): a
    copy of one built once (closed, so the one file is the whole database)."""
    if not _SEEDED:
        folder = tempfile.mkdtemp(prefix="eventlog-seeded-")
        atexit.register(shutil.rmtree, folder, True)
        template = Path(folder) / "seeded.db"
        anyio.run(_seed, url_of(template))
        assert sorted(p.name for p in template.parent.iterdir()) == ["seeded.db"]
        _SEEDED.append(template)
    db = tmp / "target.db"
    shutil.copyfile(_SEEDED[0], db)
    return db


def files_of(db: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(db.parent.glob(db.name + "*"))}


LOCATED = re.compile(r"^(?P<file>.+?)(?::|, line )(?P<line>\d+): ")


def judge(
    path: Path,
    db: Path,
    mutation: Mutation,
    *,
    accept: bool = False,
    dsh: bool = False,
    session_id: str = SID,
) -> None:
    """Import ``path`` into ``db`` and check the run ended as ``mutation`` says."""
    before = files_of(db)
    flags = [*(["--from", "dsh"] if dsh else []), *(["--accept-departures"] if accept else [])]
    result = run_main("import", *flags, str(path), db=db)
    said = f"exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    assert result.returncode == (0 if mutation.code == 1 and accept else mutation.code), said
    if mutation.code == 2:
        # Refused: one typed line naming file:line (and the field at fault, where one is);
        # the database files exactly as they were.
        [text] = result.stderr.splitlines()
        assert text.startswith("eventlog: error: "), said
        located = LOCATED.match(text.removeprefix("eventlog: error: "))
        assert located is not None and located["file"] == str(path), text
        if mutation.line is not None:
            assert int(located["line"]) == mutation.line, text
        if mutation.field is not None:
            assert f"field `{mutation.field}`" in text, said
        assert files_of(db) == before
        return
    # Imported: the session opens, verified to the end.
    assert run_main("verify", session_id, db=db).returncode == 0
    if mutation.code == 1:
        # Each departure on a line of its own naming file:line and field (the dsh report
        # lists them on standard output).
        listed = result.stdout if dsh else result.stderr
        assert f"{path}:{mutation.line}: " in listed, said
        if mutation.field is not None and not dsh:
            assert f"field `{mutation.field}`" in listed, said
    else:
        assert result.stderr == "", said


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_a_mutated_export_is_imported_departed_or_refused_never_half(name: str) -> None:
    # The base session's export, changed one way and re-chained so the chain still verifies.
    mutation = MUTATIONS[name]
    lines = base_lines()
    mutation.apply(lines)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "export.jsonl"
        path.write_bytes(chained(lines))
        # Imported into a database that holds another session already.
        judge(path, seeded_db(Path(tmp)), mutation)
    if mutation.code == 1:
        # Accepted explicitly: the same departures reported, exit 0.
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "export.jsonl"
            path.write_bytes(chained(lines))
            judge(path, seeded_db(Path(tmp)), mutation, accept=True)


INT64_MAX = 2**63 - 1


def _time_oracle(seq: int, time: int, times: list[int]) -> tuple[int, str | None]:
    if not 0 <= time <= INT64_MAX:
        return 2, "time"
    previous = times[seq - 1] if seq else None
    following = times[seq + 1] if seq + 1 < len(times) else None
    if (previous is not None and time < previous) or (following is not None and following < time):
        return 1, "time"
    return 0, None


@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_generated_times_sources_and_depths_meet_the_commit_rules(data: st.DataObject) -> None:
    lines = base_lines()
    events = _events(lines)
    what = data.draw(st.sampled_from(["time", "sources", "payload depth", "metadata depth"]))
    if what == "time":
        # Any integer as the time of any event: outside 64 bits or negative, refused; earlier
        # than the event before (or later than the one after), a departure; else clean.
        seq = data.draw(st.integers(0, len(events) - 1), label="seq")
        time = data.draw(st.integers(-(2**70), 2**70) | st.integers(0, 2 * events[-1]["time"]))
        times = [e["time"] for e in events]
        code, field = _time_oracle(seq, time, times)
        # A departure is reported at the event whose time is earlier than the one before.
        later_than_next = seq + 1 < len(times) and times[seq + 1] < time
        line = seq + 3 if code == 1 and later_than_next else seq + 2
        mutation = Mutation(at(seq, "time", time, code, field).apply, code, field, line)
    elif what == "sources":
        # Any list of seqs as the user message's sources: each must name an earlier event,
        # once.
        sources = data.draw(st.lists(st.integers(-2, 8), max_size=4), label="sources")
        good = all(0 <= s < 2 for s in sources) and len(set(sources)) == len(sources)
        mutation = at(2, "sources", sources, 0 if good else 2, None if good else "sources")
    else:
        # Any depth of nesting in an extension payload or in the metadata: up to the store's
        # limit (64 containers, the outer object included) it is taken.
        levels = data.draw(st.integers(0, 200), label="levels")
        bad = levels + 1 > 64
        if what == "payload depth":
            mutation = at(3, "data", nested(levels), 2 if bad else 0, "data" if bad else None)
        else:
            mutation = record("metadata", nested(levels), 2 if bad else 0, "metadata")
            mutation = Mutation(mutation.apply, mutation.code, mutation.field if bad else None, 1)
    mutation.apply(lines)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "export.jsonl"
        path.write_bytes(chained(lines))
        judge(path, seeded_db(Path(tmp)), mutation)


@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_an_export_damaged_byte_by_byte_is_refused_or_imported_whole(data: st.DataObject) -> None:
    # The base export, one line cut short, or a byte inserted or replaced (no re-chaining).
    text = chained(base_lines())
    lines = text.split(b"\n")[:-1]
    damage(lines, data)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "export.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        db = seeded_db(Path(tmp))
        result = import_refused_whole(path, db)
        note(f"exit {result.returncode}\nstderr: {result.stderr}")
        # Refused on one line naming the file and a line, nothing written (checked above); or
        # (a change the JSON does not see, such as a space between keys) imported whole.
        if result.returncode != 2:
            assert result.returncode == 0, result.stderr
            assert run_main("verify", SID, db=db).returncode == 0


def damage(lines: list[bytes], data: st.DataObject) -> None:
    """Cut one of ``lines`` short, or insert or replace one byte in it (drawn from ``data``)."""
    index = data.draw(st.integers(0, len(lines) - 1), label="line")
    target = lines[index]
    at_byte = data.draw(st.integers(0, len(target)), label="byte")
    byte = data.draw(st.binary(min_size=1, max_size=1), label="value")
    how = data.draw(st.sampled_from(["cut", "insert", "replace"]), label="how")
    if how == "cut":
        lines[index] = target[:at_byte]
    elif how == "insert":
        lines[index] = target[:at_byte] + byte + target[at_byte:]
    else:
        lines[index] = target[:at_byte] + byte + target[at_byte + 1 :]


def import_refused_whole(path: Path, db: Path, *flags: str) -> CompletedProcess[str]:
    """Import ``path`` into ``db``; when refused (exit 2), check the one line names the file
    and a line, and that the database files did not change."""
    before = files_of(db)
    result = run_main("import", *flags, str(path), db=db)
    if result.returncode == 2:
        [message] = result.stderr.splitlines()
        located = LOCATED.match(message.removeprefix("eventlog: error: "))
        assert located is not None and located["file"] == str(path), message
        assert files_of(db) == before
    return result


# -- a fork's parent, and attachments the store already holds --------------------------------


async def _fork(url: str) -> None:
    async with open_store(url) as store:
        parent = await store.create("parent")
        parent.append("turn/start", TurnStart(turn=1))
        parent.append("turn/end", TurnEnd(turn=1, reason="completed"))
        await parent.aclose()
        child = await store.fork("parent", 1, child_id="child")
        await child.aclose()


def test_a_fork_imported_without_its_parent_is_a_departure(tmp_path: Path) -> None:
    source = tmp_path / "source.db"
    anyio.run(_fork, url_of(source))
    child, parent = tmp_path / "child.jsonl", tmp_path / "parent.jsonl"
    assert run_main("export", "child", "-o", str(child), db=source).returncode == 0
    assert run_main("export", "parent", "-o", str(parent), db=source).returncode == 0
    # The child alone: imported as it is, its parent_id reported on its session line; exit 1.
    alone = run_main("import", str(child), db=tmp_path / "alone.db")
    assert alone.returncode == 1
    assert alone.stderr == (
        f"eventlog: warning: {child}:1: field `parent_id`: session 'child': the parent session "
        "'parent' is not in the store (imported without it)\n"
    )
    assert run_main("verify", "child", db=tmp_path / "alone.db").returncode == 0
    # With its parent, first in the same import or already in the store: nothing departs.
    both = run_main("import", str(parent), str(child), db=tmp_path / "both.db")
    assert (both.returncode, both.stderr) == (0, "")
    assert run_main("import", str(parent), db=tmp_path / "later.db").returncode == 0
    later = run_main("import", str(child), db=tmp_path / "later.db")
    assert (later.returncode, later.stderr) == (0, "")
    # Accepted explicitly: reported all the same, exit 0.
    accepted = run_main("import", "--accept-departures", str(child), db=tmp_path / "other.db")
    assert accepted.returncode == 0 and "field `parent_id`" in accepted.stderr


def test_an_attachment_missing_from_the_export_may_be_in_the_store(tmp_path: Path) -> None:
    # The base export without its attachment line: refused by a store without the bytes ...
    lines = base_lines()
    data = base64.b64decode(next(x for x in lines if x["kind"] == "attachment")["data_b64"])
    MUTATIONS["a missing attachment"].apply(lines)
    path = tmp_path / "export.jsonl"
    path.write_bytes(chained(lines))
    refused = run_main("import", str(path), db=tmp_path / "a.db")
    assert refused.returncode == 2
    assert "field `attachment`" in refused.stderr
    assert "neither the export nor the store holds its bytes" in refused.stderr
    assert not (tmp_path / "a.db").exists()  # the database this import created is gone again
    (tmp_path / "empty.db").touch()
    assert run_main("import", str(path), db=tmp_path / "empty.db").returncode == 2
    assert [p.name for p in tmp_path.glob("empty.db*")] == ["empty.db"]
    assert (tmp_path / "empty.db").read_bytes() == b""  # found empty, left empty

    # ... and imported whole by one that holds them.
    async def hold() -> None:
        async with open_store(url_of(tmp_path / "b.db")) as store:
            await store.put_attachment(data)

    anyio.run(hold)
    assert run_main("import", str(path), db=tmp_path / "b.db").returncode == 0
    assert run_main("verify", SID, db=tmp_path / "b.db").returncode == 0


@pytest.mark.anyio
async def test_check_import_names_seq_and_field_and_returns_departures() -> None:
    # Rows of a real session, read back raw from a memory store.
    async with open_store("memory:") as store:
        session = await store.create("s", metadata={"k": 1})
        session.append("turn/start", TurnStart(turn=1), time=5_000)
        session.append("turn/end", TurnEnd(turn=1, reason="completed"), time=6_000)
        await session.aclose()
        record = await store.record("s")
        rows = [row async for chunk in store.read_rows("s") for row in chunk]
        # As they are: nothing departs (the session's own store holds it: no id check here).
        assert await check_import(store, record, rows) == ()
        # A time going backwards, re-chained: imported as a departure at its seq.
        back = rechain([rows[0], msgspec.structs.replace(rows[1], time=1)], "s")
        [departure] = await check_import(store, record, back)
        assert (departure.seq, departure.field) == (1, "time")
        # A negative time: refused, naming seq and field.
        negative = rechain([msgspec.structs.replace(rows[0], time=-1), rows[1]], "s")
        with pytest.raises(ImportRefusedError) as caught:
            await check_import(store, record, negative)
        assert (caught.value.seq, caught.value.field) == (0, "time")
        assert caught.value.message == (
            "field `time`: session 's', seq 0: time -1 is not epoch milliseconds (an int from 0 "
            "to 2**63 - 1)"
        )
