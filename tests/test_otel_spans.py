"""Sessions as OpenTelemetry traces, through the SDK's in-memory exporter: the span tree, the
GenAI attributes, recovery outcomes as error status with their codes, content only when asked,
and the live observer giving the same trace as the export."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from agent.otel import SCHEMA_URL, SEMCONV_VERSION, TraceObserver, session_spans
from eventlog import open_store

from .cli_fixtures import (
    FAILED_CALLS,
    build_runs_db,
    cli_types,
    play_failures,
    run_failures,
    url_of,
)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = build_runs_db(tmp_path_factory.mktemp("otel") / "runs.db")
    anyio.run(play_failures, url_of(path))
    return path


def spans_of(db: Path, session_id: str, **options: Any) -> tuple[ReadableSpan, ...]:
    async def read() -> tuple[ReadableSpan, ...]:
        async with open_store(url_of(db), types=cli_types()) as store:
            session = await store.open(session_id, salvage=True)
            return session_spans(session, **options)

    return anyio.run(read)


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def by_name(spans: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    found: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        found.setdefault(span.name, []).append(span)
    return found


def test_the_span_tree_of_a_run_whose_tools_failed(db: Path) -> None:
    spans = spans_of(db, "failures")
    named = by_name(spans)
    # One turn: the root invoke_agent span, every other span its child, one trace.
    (root,) = named["invoke_agent"]
    assert root.parent is None
    assert {s.context.trace_id for s in spans} == {root.context.trace_id}
    assert all(
        s.parent is not None and s.parent.span_id == root.context.span_id
        for s in spans
        if s is not root
    )
    # The conventions' attributes, pinned to one version, and the session on every span.
    assert SEMCONV_VERSION == "1.37.0" and root.instrumentation_scope is not None
    assert root.instrumentation_scope.schema_url == SCHEMA_URL
    assert {attrs(s)["gen_ai.conversation.id"] for s in spans} == {"failures"}
    assert attrs(root)["gen_ai.operation.name"] == "invoke_agent"
    # Two model requests after one failed attempt; the last reports usage and its finish.
    chats = named["chat scripted"]
    assert [c.status.status_code for c in chats] == [
        StatusCode.ERROR,
        StatusCode.UNSET,
        StatusCode.UNSET,
    ]
    assert attrs(chats[0])["error.type"] == "ModelError"
    assert attrs(chats[1])["gen_ai.response.finish_reasons"] == ("tool_call",)
    assert attrs(chats[2])["gen_ai.usage.input_tokens"] == 120
    assert attrs(chats[2])["gen_ai.usage.output_tokens"] == 4
    assert attrs(chats[2])["gen_ai.request.model"] == "scripted"
    # Each tool: error status, error.type = its code, and the seqs that prove it.
    for name, code in FAILED_CALLS.items():
        (tool,) = named[f"execute_tool {name}"]
        assert tool.status.status_code == StatusCode.ERROR
        assert attrs(tool)["error.type"] == code
        assert attrs(tool)["gen_ai.tool.name"] == name
        assert attrs(tool)["eventlog.seqs.call"] < attrs(tool)["eventlog.seqs.result"]
    # Every span carries its seqs.
    assert all("eventlog.seq.start" in attrs(s) and "eventlog.seq.end" in attrs(s) for s in spans)


def test_recovery_outcomes_are_error_status_with_their_codes(db: Path) -> None:
    named = by_name(spans_of(db, "repaired"))
    tools = {
        attrs(s)["gen_ai.tool.call.id"]: s
        for n, ss in named.items()
        for s in ss
        if n.startswith("execute_tool")
    }
    fates = {attrs(s)["eventlog.fate"]: s for s in tools.values()}
    assert attrs(fates["outcome unknown"])["error.type"] == "TOOL_OUTCOME_UNKNOWN"
    assert attrs(fates["not started"])["error.type"] == "TOOL_NOT_STARTED"
    assert fates["recovered"].status.status_code == StatusCode.UNSET
    interrupted = named["invoke_agent"][0]
    assert attrs(interrupted)["error.type"] == "interrupted"
    assert interrupted.status.status_code == StatusCode.ERROR


def test_a_crashed_run_ends_its_open_spans_marked_open(db: Path) -> None:
    named = by_name(spans_of(db, "crashed"))
    (turn,) = named["invoke_agent"]
    assert attrs(turn)["eventlog.open"] is True
    started = [s for n, ss in named.items() if n.startswith("execute_tool") for s in ss]
    assert any(attrs(s).get("eventlog.open") for s in started)


def test_content_only_when_asked_in_the_parts_schema(db: Path) -> None:
    plain = spans_of(db, "failures")
    assert not any("gen_ai.input.messages" in attrs(s) for s in plain)
    assert not any("gen_ai.tool.call.arguments" in attrs(s) for s in plain)
    rich = by_name(spans_of(db, "failures", include_content=True))
    last = rich["chat scripted"][-1]
    seen = json.loads(str(attrs(last)["gen_ai.input.messages"]))
    assert seen[0] == {"role": "user", "parts": [{"type": "text", "content": "Try everything."}]}
    assert {p["type"] for m in seen for p in m["parts"]} >= {
        "text",
        "tool_call",
        "tool_call_response",
    }
    output = json.loads(str(attrs(last)["gen_ai.output.messages"]))
    assert output == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "All four failed."}],
            "finish_reason": "stop",
        }
    ]
    (typed,) = rich["execute_tool typed"]
    assert attrs(typed)["gen_ai.tool.call.arguments"] == '{"n": "x"}'


def _shape(spans: tuple[ReadableSpan, ...]) -> list[tuple[str, dict[str, Any], StatusCode]]:
    return sorted(
        ((s.name, dict(s.attributes or {}), s.status.status_code) for s in spans),
        key=lambda t: (t[1]["eventlog.seq.start"], t[0]),
    )


def test_the_live_observer_gives_the_export_trace() -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))

    async def run() -> tuple[ReadableSpan, ...]:
        async with open_store("memory:") as store:
            # The observer watches the session while a real agent run commits to it.
            session = await store.create("failures")
            observer = TraceObserver(session, provider)
            await run_failures(session)
            observer.close()
            # The same events, exported afterwards.
            exported = session_spans(session)
            await session.aclose()
            return exported

    exported = anyio.run(run)
    live = memory.get_finished_spans()
    assert len(live) == len(exported) == 8
    assert _shape(live) == _shape(exported)


def test_the_live_observer_records_each_request_s_messages_on_a_session_that_trims() -> None:
    """A long live session drops old events from memory at its snapshots (trim_every): the
    observer still records, for every model request, exactly the messages it sent, the same
    as an export of the whole stored log."""
    from tests.test_live_trim import plan
    from tests.test_snapshots import play

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))

    async def run() -> tuple[int, tuple[ReadableSpan, ...]]:
        async with open_store("memory:", snapshot_every=15, trim_every=1) as store:
            session = await store.create("long")
            observer = TraceObserver(session, provider, include_content=True)
            for turn in range(1, 25):  # compactions every third turn, a snapshot after each
                play(session, turn, plan(turn))
                await session.flush()
            observer.close()
            loaded_from = session.loaded_from
            await session.aclose()
            whole = await store.open("long", verify="full")
            exported = session_spans(whole, include_content=True)
            await whole.aclose()
            return loaded_from, exported

    loaded_from, exported = anyio.run(run)
    assert loaded_from > 0, "the live session did drop old events from memory"
    live = memory.get_finished_spans()
    chats = [s for s in live if s.name.startswith("chat")]
    assert chats and all("gen_ai.input.messages" in (s.attributes or {}) for s in chats)
    assert _shape(live) == _shape(exported)
