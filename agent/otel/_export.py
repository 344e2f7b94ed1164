"""Export a stored session as a trace, or trace a live one as it is committed."""

from __future__ import annotations

from collections.abc import Callable

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import TracerProvider as ApiTracerProvider

from eventlog import EventLogError, Session

from ..report import counted
from ._mapping import SCHEMA_URL, SpanBuilder

__all__ = ("DEFAULT_ENDPOINT", "TraceObserver", "export_otlp", "session_spans", "trace_session")

#: Where ``export_otlp`` sends by default: an OTLP/HTTP receiver on this machine.
DEFAULT_ENDPOINT = "http://127.0.0.1:4318/v1/traces"


def trace_session(
    session: Session,
    provider: ApiTracerProvider,
    *,
    include_content: bool = False,
    agent_name: str | None = None,
) -> None:
    """Send every committed event of ``session`` as spans to ``provider``'s processors; spans
    a crash (or a live writer) left open end at the last event, ``eventlog.open = true``."""
    builder = SpanBuilder(
        provider.get_tracer("eventlog", schema_url=SCHEMA_URL),
        session,
        include_content=include_content,
        agent_name=agent_name,
    )
    for event in session.events():
        builder.feed(event)
    builder.close()


def session_spans(session: Session, *, include_content: bool = False) -> tuple[ReadableSpan, ...]:
    """The finished spans of ``session``, built in memory (resource ``service.name=eventlog``)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "eventlog"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    trace_session(session, provider, include_content=include_content)
    provider.shutdown()
    return memory.get_finished_spans()


def export_otlp(
    session: Session,
    endpoint: str = DEFAULT_ENDPOINT,
    *,
    include_content: bool = False,
    timeout: float = 10.0,
) -> int:
    """Send ``session`` as a trace to the OTLP/HTTP receiver at ``endpoint`` (its traces URL;
    a bare ``http://host:port`` gets ``/v1/traces``); return the number of spans sent.

    :raises EventLogError: the receiver did not accept them (names the endpoint).
    """
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    url = (
        endpoint
        if endpoint.rstrip("/").endswith("/v1/traces")
        else endpoint.rstrip("/") + "/v1/traces"
    )
    spans = session_spans(session, include_content=include_content)
    exporter = OTLPSpanExporter(endpoint=url, timeout=timeout)
    try:
        result = exporter.export(spans)
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]
    if result is not SpanExportResult.SUCCESS:
        raise EventLogError(
            f"session {session.id!r}: the OTLP receiver at {url} did not accept "
            f"{counted(len(spans), 'span')}",
            session_id=session.id,
            hint="is a receiver listening there (OTLP over HTTP, protobuf)?",
        )
    return len(spans)


class TraceObserver:
    """Trace a live session: subscribes to its commits and emits each span as soon as the
    event that ends it is committed (a turn's root span when the turn ends).

    :param session: the session to watch (any writer's or reader's view of it).
    :param provider: where spans go (its processors export them: batch them for a live run).
    :param include_content: also record message content.
    """

    def __init__(
        self,
        session: Session,
        provider: ApiTracerProvider,
        *,
        include_content: bool = False,
        agent_name: str | None = None,
    ) -> None:
        self._builder = SpanBuilder(
            provider.get_tracer("eventlog", schema_url=SCHEMA_URL),
            session,
            include_content=include_content,
            agent_name=agent_name,
        )
        self._unsubscribe: Callable[[], None] | None = session.subscribe(self._builder.feed)

    def close(self) -> None:
        """Stop watching; spans still open end now, marked ``eventlog.open = true``."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
            self._builder.close()
