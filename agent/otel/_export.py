"""Export a stored session as a trace, or trace a live one as it is committed."""

from __future__ import annotations

import contextlib
import logging
import socket
import urllib.parse
from collections.abc import Callable, Iterator

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import TracerProvider as ApiTracerProvider

from eventlog import EventLogError, Session, ValidationError

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
    for event in session.window(0):
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

    Fails fast: a receiver nobody listens at is found with one connection attempt (at most
    ``timeout`` seconds, 3 at most) before any span is built; a receiver that answers but does
    not accept is retried by the exporter within ``timeout``, and its log lines are collected
    into the error instead of printed.

    :raises ValidationError: ``endpoint`` is not an ``http(s)://host[:port]/…`` URL.
    :raises EventLogError: the receiver cannot be reached or did not accept the spans (the
        message names the endpoint and the reason).
    """
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    url, host, port = _traces_url(endpoint)
    _reachable(session, url, host, port, min(timeout, _CONNECT_TIMEOUT))
    spans = session_spans(session, include_content=include_content)
    exporter = OTLPSpanExporter(endpoint=url, timeout=timeout)
    with _collected_logs() as said:
        try:
            result = exporter.export(spans)
        finally:
            exporter.shutdown()  # type: ignore[no-untyped-call]
    if result is not SpanExportResult.SUCCESS:
        why = f": {said[-1]}" if said else ""
        raise EventLogError(
            f"session {session.id!r}: the OTLP receiver at {url} did not accept "
            f"{counted(len(spans), 'span')}{why}",
            session_id=session.id,
            hint="is a receiver listening there (OTLP over HTTP, protobuf)?",
        )
    return len(spans)


#: How long the check that a receiver listens waits for the connection.
_CONNECT_TIMEOUT = 3.0


def _traces_url(endpoint: str) -> tuple[str, str, int]:
    """The traces URL of ``endpoint``, its host and its port.

    :raises ValidationError: it is not an ``http(s)://host[:port]/…`` URL.
    """
    url = (
        endpoint
        if endpoint.rstrip("/").endswith("/v1/traces")
        else endpoint.rstrip("/") + "/v1/traces"
    )
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        host = parts.hostname
        if parts.scheme not in ("http", "https") or not host:
            raise ValueError("expected http://host:port/…")
    except ValueError as exc:  # an unclosed IPv6 bracket, a port out of range, no host
        raise ValidationError(
            f"OTLP endpoint {endpoint!r} is not a URL to send to: {exc}",
            hint="pass --endpoint http://host:4318/v1/traces",
        ) from None
    return url, host, port


def _reachable(session: Session, url: str, host: str, port: int, timeout: float) -> None:
    """Connect once to ``host`` and ``port``, so a dead endpoint fails at once instead of
    after the exporter's retries.

    :raises EventLogError: nothing accepts connections there.
    """
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        raise EventLogError(
            f"session {session.id!r}: cannot reach the OTLP receiver at {url}: "
            f"{exc.strerror or exc or type(exc).__name__}",
            session_id=session.id,
            hint="start a receiver there (OTLP over HTTP, protobuf), or pass --endpoint",
        ) from None


@contextlib.contextmanager
def _collected_logs() -> Iterator[list[str]]:
    """The exporter's log lines while it works, kept (the last is the reason of a failure)
    instead of printed: the failure is reported once, as an error."""
    logger = logging.getLogger("opentelemetry.exporter")
    said: list[str] = []

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(" ".join(record.getMessage().split()))

    handler = _Keep()
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield said
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


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
