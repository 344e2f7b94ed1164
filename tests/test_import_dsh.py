"""Importing DeepSeek Harness (dsh) session logs: every real log, the report, malformed input.

The expected model-visible history is computed here independently of the importer: the dsh
surface is folded over *dsh* seqs (packed rows take one seq per member) and each surviving
node's message is mapped; the imported session, renumbered and chunk-free, must derive the same
messages in the same order.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from eventlog import (
    BacklogFullError,
    Event,
    ImagePart,
    Message,
    ReasoningPart,
    Session,
    Store,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    UnsupportedFormatError,
    open_store,
)
from eventlog.importers import (
    EXTENSION_PREFIX,
    FOLDED_TYPES,
    ORIGINAL_TYPE,
    DshFormatError,
    ImportReport,
    import_dsh,
)
from eventlog.importers._dsh_convert import Converter
from projections import messages
from recovery import repair
from recovery.testing import check_invariants

from .dsh_logs import DSH_LOGS, dsh_params, needs_dsh_logs

CORE = frozenset(
    {
        "turn/start",
        "turn/end",
        "step/start",
        "step/end",
        "user/message",
        "assistant/message",
        "tool/call",
        "tool/result",
        "agent/inbox/spliced",
        "request/header",
    }
)
PACKED = {"text-chunks": "texts", "reasoning-chunks": "texts", "tool-call-chunks": "args"}


# -- an independent reading of a dsh log ---------------------------------------------------------


def dsh_events(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """``(dsh seq, record)`` for every line after the header; packed rows take several seqs."""
    found = []
    seq = 0
    for line in path.read_text().splitlines()[1:]:
        record = json.loads(line)
        found.append((seq, record))
        packed = PACKED.get(record["type"])
        seq += len(record["data"][packed]) if packed else 1
    return found


def dsh_surface_messages(path: Path) -> list[Message]:
    """The dsh model-visible history: surface events in order, replaces applied."""
    nodes: list[int] = []
    by_seq = {}
    for seq, record in dsh_events(path):
        op = record.get("surfaceOp")
        if op is None:
            continue
        by_seq[seq] = record
        if op == "append":
            nodes.append(seq)
        else:
            first, last = nodes.index(op["start"]), nodes.index(op["end"])
            nodes[first : last + 1] = [seq]
    derived = []
    for seq in nodes:
        record = by_seq[seq]
        message = Converter().convert(record["type"], record["data"], seq).payload.message
        if message.content or record["type"] != "assistant/message":
            derived.append(message)
    return derived


def raw_skeleton(record: dict[str, Any]) -> tuple[Any, ...]:
    """What a surface record's message says, read straight from the dsh JSON."""
    data = record["data"]
    raw = data.get("message", data) if record["type"] != "user/message" else data
    if record["type"] == "tool/result" and "message" not in data:  # the older shape
        return ("tool", (("tool-result", data["callId"], data["isError"], ()),))
    role = {"user/message": "user", "assistant/message": "assistant"}.get(record["type"], "tool")
    parts: list[tuple[Any, ...]] = []
    for part in raw["content"]:
        kind = part["type"]
        if kind in ("text", "reasoning"):
            parts.append((kind, part["text"]))
        elif kind == "tool-call":
            parts.append((kind, part["id"], part["arguments"]))
        elif kind == "tool-result":
            content = part["content"] if isinstance(part["content"], list) else []
            images = tuple(_raw_image(block) for block in content if block["type"] == "image")
            parts.append((kind, part["toolCallId"], part["isError"], images))
        else:
            parts.append(_raw_image(part))
    return (role, tuple(parts))


def _raw_image(block: dict[str, Any]) -> tuple[str, str, str]:
    # An image is its attachment reference: digest and media type.
    attachment = block["attachment"]
    return ("image", attachment["attachmentId"], attachment["mediaType"])


def skeleton(message: Message) -> tuple[Any, ...]:
    """The same reading of one of our messages."""
    parts: list[tuple[Any, ...]] = []
    for part in message.content:
        if isinstance(part, ImagePart):
            assert part.attachment is not None
            parts.append(("image", part.attachment, part.media_type))
        elif isinstance(part, TextPart | ReasoningPart):
            parts.append(("text" if isinstance(part, TextPart) else "reasoning", part.text))
        elif isinstance(part, ToolCallPart):
            parts.append(("tool-call", part.id, part.arguments))
        elif isinstance(part, ToolResultPart):
            content = () if isinstance(part.content, str) else part.content
            images = tuple(
                ("image", p.attachment, p.media_type) for p in content if isinstance(p, ImagePart)
            )
            parts.append(("tool-result", part.call_id, part.is_error, images))
    return (message.role, tuple(parts))


def surface_records(path: Path) -> list[dict[str, Any]]:
    """The dsh surface records in order (replaces applied), empty assistant messages dropped."""
    nodes: list[tuple[int, dict[str, Any]]] = []
    for seq, record in dsh_events(path):
        op = record.get("surfaceOp")
        if op == "append":
            nodes.append((seq, record))
        elif op is not None:
            seqs = [s for s, _ in nodes]
            nodes[seqs.index(op["start"]) : seqs.index(op["end"]) + 1] = [(seq, record)]
    return [r for _, r in nodes if raw_skeleton(r)[1] or r["type"] != "assistant/message"]


def count(events: list[Event] | list[dict[str, Any]], type_: str) -> int:
    return sum(1 for e in events if (e["type"] if isinstance(e, dict) else e.type) == type_)


async def imported(store: Store, path: Path) -> tuple[ImportReport, Session]:
    report = await import_dsh(store, path)
    return report, await store.open(report.session_id)


# -- every real log ------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("path", dsh_params())
async def test_every_log_imports_faithfully(path: Path) -> None:
    records = [record for _, record in dsh_events(path)]
    async with open_store("memory:") as store:
        report, session = await imported(store, path)
        events = list(await session.events())

        # The model-visible history is the dsh one, message by message.
        history = list(messages(session))
        assert history == dsh_surface_messages(path)
        # ... and says what the dsh JSON says, read without the importer's converter.
        assert [skeleton(m) for m in history] == [raw_skeleton(r) for r in surface_records(path)]

        # Turns and tool calls: the same counts (a turn/end that is no turn/end is reported).
        refused = Counter(r.type for r in report.refused)
        for type_ in ("turn/start", "turn/end", "step/start", "tool/call", "tool/result"):
            assert count(events, type_) + refused[type_] == count(records, type_), type_
        assert refused.keys() <= {"turn/end"}  # only the hand-authored "model exploded" line

        # Plugin-owned events are kept, in order, with their data intact.
        kept = [r for r in records if r["type"] not in CORE and r["type"] not in FOLDED_TYPES]
        extensions = [
            e for e in events if e.type.startswith(EXTENSION_PREFIX) and e.type != ORIGINAL_TYPE
        ]
        assert [(e.type, e.data) for e in extensions if e.type != "dsh/turn/end"] == [
            (EXTENSION_PREFIX + r["type"], r["data"]) for r in kept
        ]
        assert all(e.ignorable for e in extensions)

        # The report adds up.
        folded = [r for r in records if r["type"] in FOLDED_TYPES]
        assert report.folded == sum(
            len(r["data"].get(PACKED.get(r["type"], ""), [0])) for r in folded
        )
        assert report.packed_rows == sum(1 for r in folded if r["type"] in PACKED)
        assert report.events == len(events) == report.core + report.extensions + report.originals
        assert report.core + report.extensions + len(folded) == len(records)

        # Repair closes a crashed run's open turn; the result keeps every invariant.
        assert (report.open_turn is not None) == (
            count(events, "turn/start") > count(events, "turn/end")
        )
        await repair(session)
        check_invariants(session)
        await session.aclose()


# -- the report on chosen logs -------------------------------------------------------------------


@pytest.mark.anyio
@needs_dsh_logs
async def test_report_of_a_cancelled_parallel_tool_run() -> None:
    async with open_store("memory:") as store:
        report = await import_dsh(store, DSH_LOGS / "acp-agent--cancel-tool-calls.jsonl")
    # 24 dsh events: 8 chunks folded; 14 core and 2 plugin events kept; 3 core events lost
    # something our payloads cannot hold, kept beside them in dsh/original.
    assert (report.lines, report.dsh_events, report.events) == (25, 24, 19)
    assert (report.core, report.extensions, report.originals, report.folded) == (14, 2, 3, 8)
    assert report.refused == ()
    assert report.losses == {
        "message.source.kind=plugin": 1,
        "request/header.header.tools": 1,
        "request/header.reason": 1,
        "turn/end.reason.reason": 1,
    }


@pytest.mark.anyio
@needs_dsh_logs
async def test_compaction_replace_is_remapped_onto_the_new_seqs() -> None:
    async with open_store("memory:") as store:
        path = DSH_LOGS / "headless-agent--compaction-recovery.jsonl"
        report, session = await imported(store, path)
        replace = [e for e in await session.events() if e.type == "user/message" and e.sources]
        assert len(replace) == 1
        # dsh: replace(4, 4) with sources [19, 20, 4]; chunks before it took no seq here.
        event = replace[0]
        shadowed = (await session.events())[event.surface.start]  # type: ignore[union-attr]
        assert shadowed.type == "user/message"
        assert event.surface.start == event.surface.end  # type: ignore[union-attr]
        assert [(await session.events())[s].type for s in event.sources] == [
            "dsh/compaction/start",
            "dsh/compaction/summary",
            "user/message",
        ]
        assert event.data.message.source.kind == "compaction"
        assert report.refused == ()
        await session.aclose()


@pytest.mark.anyio
@needs_dsh_logs
async def test_a_crashed_run_is_imported_open_and_repair_closes_it() -> None:
    async with open_store("memory:") as store:
        report, session = await imported(
            store, DSH_LOGS / "test-support--acp-snapshot--suite--pin-turn.jsonl"
        )
        assert report.open_turn == 1
        assert report.notes == ("header has no version; read as version 0",)
        result = await repair(session)
        assert [(await session.events())[s].type for s in result.appended] == ["turn/end"]
        assert (await session.events())[-1].data.reason == "interrupted"
        check_invariants(session)
        await session.aclose()


@pytest.mark.anyio
@needs_dsh_logs
async def test_a_core_event_that_does_not_fit_is_kept_and_reported() -> None:
    path = DSH_LOGS / "test-support--acp-snapshot--suite--authored-error.jsonl"
    async with open_store("memory:") as store:
        report, session = await imported(store, path)
        [refusal] = report.refused
        assert (refusal.line, refusal.type) == (2, "turn/end")
        assert refusal.reason == (
            "turn/end reason None is not one of the known kinds; kept as dsh/turn/end"
        )
        [event] = await session.events()
        assert (event.type, event.data) == ("dsh/turn/end", {"error": "model exploded"})
        assert f"{path}:2: refused (turn/end): {refusal.reason}" in report.summary()
        assert not report.complete
        await session.aclose()


@pytest.mark.anyio
@needs_dsh_logs
async def test_lossy_core_data_is_kept_in_dsh_original() -> None:
    path = DSH_LOGS / "acp-agent--cancel-tool-calls.jsonl"
    lines = path.read_text().splitlines()
    async with open_store("memory:") as store:
        _, session = await imported(store, path)
        events = await session.events()
        originals = [e for e in events if e.type == ORIGINAL_TYPE]
        header = next(e for e in originals if e.data["type"] == "request/header")
        [mapped] = header.sources
        assert events[mapped].type == "request/header"
        assert header.data["data"] == json.loads(lines[8])["data"]  # line 9: request/header
        assert session.metadata["imported_from"] == "dsh"
        assert session.metadata["dsh_header"] == json.loads(lines[0])
        await session.aclose()


# -- malformed input: an error naming file and line, and nothing imported ------------------------


@pytest.mark.anyio
@needs_dsh_logs
@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "not valid JSON: "),
        ("[1, 2]", "expected a JSON object, got an array"),
        ('{"data": {}}', "the event has no string 'type'"),
        ('{"type": "turn/start"}', "the 'turn/start' event has no 'data'"),
        ('{"type": "turn/start", "data": {"turn": 1}, "seq": 7}', "'seq' is 7 but the event"),
        (
            '{"type": "user/message", "data": {}, "surfaceOp": "prepend"}',
            "'surfaceOp' 'prepend' is neither 'append' nor a replace",
        ),
        ('{"type": "text-chunks", "data": {"texts": []}}', "packed row 'text-chunks' has no"),
    ],
)
async def test_a_malformed_line_names_file_and_line_and_imports_nothing(
    tmp_path: Path, line: str, message: str
) -> None:
    source = (DSH_LOGS / "acp-agent--cancel.jsonl").read_text().splitlines()
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([*source[:3], line, *source[3:]]) + "\n")
    async with open_store("memory:") as store:
        with pytest.raises(DshFormatError) as caught:
            await import_dsh(store, path)
        assert caught.value.message.startswith(f"{path}, line 4: {message}")
        assert (caught.value.file, caught.value.line) == (str(path), 4)
        assert await store.list() == []


@pytest.mark.anyio
async def test_header_errors() -> None:
    async with open_store("memory:") as store:
        with pytest.raises(DshFormatError, match=r"^<lines>: empty log: the session header"):
            await import_dsh(store, [])
        with pytest.raises(DshFormatError, match=r"^<lines>, line 1: expected the session header"):
            await import_dsh(store, ['{"type": "turn/start", "data": {"turn": 1}}'])
        with pytest.raises(UnsupportedFormatError) as caught:
            await import_dsh(
                store, ['{"type": "session", "version": 2, "id": "x", "createdAt": 0}']
            )
        assert str(caught.value) == (
            "<lines>, line 1: dsh log format version 2 is not supported (this importer reads "
            "version 0) (hint: written by a newer harness)"
        )
        assert await store.list() == []


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["session.jsonl.zst", "session.jsonl.zstd", "renamed.jsonl"])
async def test_zstd_logs_are_refused_clearly(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 16)  # a zstd frame's magic number
    async with open_store("memory:") as store:
        with pytest.raises(UnsupportedFormatError) as caught:
            await import_dsh(store, path)
        assert str(caught.value) == (
            f"{path}: zstd-compressed dsh logs (.jsonl.zst) are not supported: eventlog does not "
            "depend on a zstandard package (hint: decompress it first (`zstd -d "
            f"{path}`) and import the plain .jsonl file)"
        )
        assert await store.list() == []


@pytest.mark.anyio
@needs_dsh_logs
async def test_a_store_failure_half_way_leaves_no_session() -> None:
    # A write backlog this small fills up part-way through the log: append raises
    # BacklogFullError, and the importer deletes the session it had started.
    async with open_store("memory:", max_pending_bytes=4096, write_delay=3600) as store:
        with pytest.raises(BacklogFullError, match="bytes are waiting to be written"):
            await import_dsh(store, DSH_LOGS / "web--goal-multi-turn-actions.jsonl")
        assert await store.list() == []


@pytest.mark.anyio
@needs_dsh_logs
async def test_the_session_id_and_metadata_can_be_chosen() -> None:
    async with open_store("memory:") as store:
        report = await import_dsh(
            store, DSH_LOGS / "acp-agent--cancel.jsonl", session_id="run-1", metadata={"team": "a"}
        )
        [info] = await store.list()
        assert (report.session_id, info.id) == ("run-1", "run-1")
        assert info.metadata["team"] == "a"
        assert info.metadata["dsh_file"] == str(DSH_LOGS / "acp-agent--cancel.jsonl")


# -- a real SQLite file ----------------------------------------------------------------------------


@pytest.mark.anyio
@needs_dsh_logs
async def test_sqlite_round_trip(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    path = DSH_LOGS / "acp-agent--advanced-toolchain.jsonl"
    async with open_store(url) as store:
        report, session = await imported(store, path)
        written: list[Event] = list(await session.events())
        await session.aclose()
    # A fresh process knows no dsh types: extensions come back as raw JSON, core ones typed.
    async with open_store(url) as store:
        again = await store.open(report.session_id)
        assert list(messages(again)) == dsh_surface_messages(path)
        assert [(e.seq, e.type, e.time, e.surface, e.sources) for e in await again.events()] == [
            (e.seq, e.type, e.time, e.surface, e.sources) for e in written
        ]
        for old, new in zip(written, (await again.events()), strict=True):
            if old.type.startswith(EXTENSION_PREFIX):
                assert json.loads(new.data.raw) == old.data
            else:
                assert new.data == old.data
        await repair(again)
        check_invariants(again)
        await again.aclose()
