"""Importing dsh logs written for the occasion: refusals, renumbering, times and odd lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from eventlog import APPEND, open_store
from eventlog.importers import DshFormatError, ImportReport, import_dsh
from projections import messages

HEADER = {"type": "session", "version": 0, "id": "s", "createdAt": 1000}


def user(text: str, id_: str) -> dict[str, Any]:
    return {"role": "user", "id": id_, "content": [{"type": "text", "text": text}]}


def line(type_: str, data: Any, **envelope: Any) -> str:
    return json.dumps({"type": type_, "data": data, **envelope})


def log(*lines: str) -> list[str]:
    return [json.dumps(HEADER), *lines]


async def run(lines: list[str]) -> tuple[ImportReport, list[Any], list[Any]]:
    """Import; return the report, the events and the derived messages."""
    async with open_store("memory:") as store:
        report = await import_dsh(store, lines)
        session = await store.open(report.session_id)
        events, history = list(await session.events()), list(messages(session))
        await session.aclose()
        return report, events, history


CALL = {
    "role": "assistant",
    "id": "a1",
    "content": [{"type": "tool-call", "id": "c1", "name": "ls", "arguments": "{}"}],
}


@pytest.mark.anyio
async def test_a_replace_naming_a_folded_chunk_is_refused_and_kept() -> None:
    report, events, history = await run(
        log(
            line("turn/start", {"turn": 1}),  # seq 0
            line("assistant/chunk", {"turn": 1, "step": 1, "chunk": {}}),  # seq 1: folded
            line(
                "user/message",
                user("summary", "u1"),
                surfaceOp={"op": "replace", "start": 1, "end": 1},
                sourceEventSeqs=[1],
            ),
        )
    )
    [refusal] = report.refused
    assert (refusal.line, refusal.type) == (4, "user/message")
    assert refusal.reason == (
        "replace names dsh seq 1, which was not imported; kept as dsh/user/message"
    )
    assert [e.type for e in events] == ["turn/start", "dsh/user/message"]
    assert history == []


@pytest.mark.anyio
async def test_a_replace_the_log_refuses_is_reported_with_the_logs_reason() -> None:
    report, events, history = await run(
        log(
            line("user/message", user("hi", "u1"), surfaceOp="append"),  # seq 0
            line("turn/start", {"turn": 1}),  # seq 1
            line("step/start", {"turn": 1, "step": 1}),  # seq 2
            line(
                "assistant/message",
                {"turn": 1, "step": 1, "message": CALL},
                surfaceOp="append",
            ),  # seq 3
            line(
                "user/message",
                user("summary", "u2"),
                surfaceOp={"op": "replace", "start": 0, "end": 3},
                sourceEventSeqs=[0, 3],
            ),
        )
    )
    [refusal] = report.refused
    assert refusal.line == 6
    # The reason is the log's own SurfaceError message, then what the importer did.
    assert "seq 4: Replace(0, 3): would separate a tool call from its result" in refusal.reason
    assert refusal.reason.endswith("; kept as dsh/user/message")
    assert [m.id for m in history] == ["u1", "a1"]
    assert events[-1].type == "dsh/user/message"
    assert report.open_turn == 1


@pytest.mark.anyio
async def test_seqs_are_renumbered_and_sources_remapped() -> None:
    packed = {"turn": 1, "step": 1, "index": 0, "dt": [0, 0], "texts": ["a", "b", "c"]}
    result = {
        "role": "user",
        "id": "r1",
        "source": {"kind": "tool", "callId": "c1"},
        "content": [{"type": "tool-result", "toolCallId": "c1", "content": "ok", "isError": False}],
    }
    report, events, _ = await run(
        log(
            line("turn/start", {"turn": 1}),  # dsh seq 0
            line("step/start", {"turn": 1, "step": 1}),  # 1
            line("text-chunks", packed),  # 2, 3, 4
            line("assistant/message", {"turn": 1, "step": 1, "message": CALL},
                 surfaceOp="append", sourceEventSeqs=[2, 3, 4]),  # 5
            line("tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "ls",
                               "arguments": "{}"}),  # 6
            line("tool/result", {"turn": 1, "step": 1, "message": result},
                 surfaceOp="append", sourceEventSeqs=[6]),  # 7
        )
    )  # fmt: skip
    assert [(e.seq, e.type, e.surface, e.sources) for e in events] == [
        (0, "turn/start", None, ()),
        (1, "step/start", None, ()),
        (2, "assistant/message", APPEND, ()),  # its sources were the folded chunks
        (3, "tool/call", None, ()),
        (4, "tool/result", APPEND, (3,)),
    ]
    assert (report.folded, report.packed_rows, report.dsh_events) == (3, 1, 8)
    assert events[2].data.finish == "tool-calls"
    assert events[4].data.message.role == "tool"


@pytest.mark.anyio
async def test_times_are_kept_and_never_run_backwards() -> None:
    report, events, _ = await run(
        log(
            line("turn/start", {"turn": 1}, seq=0, time=5000),
            line("step/start", {"turn": 1, "step": 1}, seq=1, time=4000),
            line("step/end", {"turn": 1, "step": 1}, seq=2),
            line("turn/end", {"turn": 1, "reason": {"kind": "completed"}}, seq=3, time=6000),
        )
    )
    assert [e.time for e in events] == [5000, 5000, 5000, 6000]
    # The raised time is a departure, reported at its line: the import is not complete.
    assert report.notes == ()
    assert [(d.line, d.type, d.reason) for d in report.departures] == [
        (3, "step/start", "time 4000 is earlier than the event before (5000); raised to it")
    ]
    assert not report.complete


@pytest.mark.anyio
async def test_events_without_times_take_the_header_creation_time() -> None:
    _, events, _ = await run(log(line("turn/start", {"turn": 1})))
    assert events[0].time == 1000


@pytest.mark.anyio
async def test_a_plugin_event_whose_data_is_no_object_is_not_imported() -> None:
    report, events, _ = await run(
        log(line("app/thing", [1, 2]), line("original", {}), line("app/thing", {"ok": True}))
    )
    assert [(r.line, r.type) for r in report.refused] == [(2, "app/thing"), (3, "original")]
    assert report.refused[0].reason.endswith("; not imported")
    assert report.refused[1].reason == "dsh/original is reserved for the importer; not imported"
    assert [(e.type, e.data) for e in events] == [("dsh/app/thing", {"ok": True})]


@pytest.mark.anyio
async def test_old_shapes_and_missing_ids_are_mapped_deterministically() -> None:
    report, events, history = await run(
        log(
            line(
                "user/message",
                {"content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}},
                surfaceOp="append",
            ),
            line("turn/start", {"turn": 1}),
            line("step/start", {"turn": 1, "step": 1}),
            line(
                "assistant/message",
                {
                    "turn": 1,
                    "step": 1,
                    "content": [{"type": "text", "text": "yo"}],
                    "provenance": {"provider": "p", "model": "m"},
                    "usage": {"inputTokens": 3, "outputTokens": 4},
                },
                surfaceOp="append",
            ),
        )
    )
    assert [(m.id, m.role, m.text) for m in history] == [
        ("dsh-0", "user", "hi"),
        ("dsh-3", "assistant", "yo"),
    ]
    [reply] = [e for e in events if e.type == "assistant/message"]
    assert reply.data.usage.output_tokens == 4
    assert report.losses == {"message.source.route": 1}


@pytest.mark.anyio
async def test_lines_may_end_in_newlines_and_blank_lines_may_trail() -> None:
    lines = [text + "\n" for text in log(line("turn/start", {"turn": 1}))] + ["\n", "  \n"]
    report, events, _ = await run(lines)
    assert (report.lines, len(events)) == (2, 1)


@pytest.mark.anyio
async def test_a_blank_line_inside_the_log_is_malformed() -> None:
    async with open_store("memory:") as store:
        lines = log(line("turn/start", {"turn": 1}), "", line("turn/end", {}))
        with pytest.raises(DshFormatError, match=r"^<lines>, line 3: not valid JSON: "):
            await import_dsh(store, lines)


@pytest.mark.anyio
async def test_a_file_that_is_not_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(json.dumps(HEADER).encode() + b'\n{"type": "x/y", "data": "\xe9"}\n')
    async with open_store("memory:") as store:
        with pytest.raises(DshFormatError) as caught:
            await import_dsh(store, path)
        assert caught.value.message == f"{path}, line 2: not UTF-8 text: invalid continuation byte"


@pytest.mark.anyio
async def test_sources_naming_no_earlier_event_are_dropped_and_noted() -> None:
    report, events, _ = await run(
        log(
            line("user/message", user("hi", "u1"), surfaceOp="append", sourceEventSeqs=[7, 9]),
        )
    )
    assert events[0].sources == ()
    assert [(d.line, d.reason) for d in report.departures] == [
        (2, "2 sourceEventSeqs name no earlier event (first 7); dropped")
    ]
    assert not report.complete


@pytest.mark.anyio
async def test_an_original_too_large_to_keep_is_reported() -> None:
    message = user("x" * 1000, "u1")
    message["source"] = {"kind": "plugin", "plugin": "p", "sections": [{"text": "y" * 1000}]}
    async with open_store("memory:", max_event_bytes=1600) as store:
        report = await import_dsh(store, log(line("user/message", message, surfaceOp="append")))
    [refusal] = report.refused
    assert refusal.reason.startswith("imported, but its original data was not kept: session ")
    assert "payload of 'dsh/original' is " in refusal.reason
    assert (report.core, report.originals) == (1, 0)
