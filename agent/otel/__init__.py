"""OpenTelemetry for sessions, mapped to the GenAI semantic conventions (version
:data:`SEMCONV_VERSION`): ``export_otlp`` sends a stored session to an OTLP/HTTP receiver,
``TraceObserver`` traces a live one, ``session_spans`` builds the spans in memory. Needs the
``otel`` extra (opentelemetry-sdk, opentelemetry-exporter-otlp-proto-http)."""

from eventlog import needs_extra as _needs_extra

with _needs_extra("otel", "agent.otel", "opentelemetry"):
    from ._export import (
        DEFAULT_ENDPOINT as DEFAULT_ENDPOINT,
    )
from ._export import (
    TraceObserver as TraceObserver,
)
from ._export import (
    export_otlp as export_otlp,
)
from ._export import (
    session_spans as session_spans,
)
from ._export import (
    trace_session as trace_session,
)
from ._mapping import (
    SCHEMA_URL as SCHEMA_URL,
)
from ._mapping import (
    SEMCONV_VERSION as SEMCONV_VERSION,
)
from ._mapping import (
    SpanBuilder as SpanBuilder,
)
from ._mapping import (
    message_parts as message_parts,
)

__all__ = (
    "DEFAULT_ENDPOINT",
    "SCHEMA_URL",
    "SEMCONV_VERSION",
    "SpanBuilder",
    "TraceObserver",
    "export_otlp",
    "message_parts",
    "session_spans",
    "trace_session",
)
