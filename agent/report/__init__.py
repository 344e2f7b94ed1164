"""What a session says about its run, classed once for every view: each tool call's fate with
the seqs that prove it, failed model attempts, and the session's state (``running`` when
:func:`eventlog.stores.writer_alive` says its writer is alive); and the one way every view
shows events and messages as text and JSON values (the CLI's tables and the web app)."""

from ._fates import (
    FAILED_FATES as FAILED_FATES,
)
from ._fates import (
    FAILED_TURN_ENDS as FAILED_TURN_ENDS,
)
from ._fates import (
    FINDING_STATES as FINDING_STATES,
)
from ._fates import (
    PENDING_FATES as PENDING_FATES,
)
from ._fates import (
    Fate as Fate,
)
from ._fates import (
    SessionState as SessionState,
)
from ._fates import (
    call_approval as call_approval,
)
from ._fates import (
    call_arguments as call_arguments,
)
from ._fates import (
    call_error as call_error,
)
from ._fates import (
    call_fate as call_fate,
)
from ._fates import (
    call_row as call_row,
)
from ._fates import (
    failed_attempts as failed_attempts,
)
from ._fates import (
    failed_turns as failed_turns,
)
from ._fates import (
    result_fate as result_fate,
)
from ._fates import (
    session_state as session_state,
)
from ._load import Loaded as Loaded
from ._load import load_session as load_session
from ._render import counted as counted
from ._render import event_json as event_json
from ._render import event_summary as event_summary
from ._render import message_text as message_text
from ._render import timestamp as timestamp
from ._runs import (
    RunSpan as RunSpan,
)
from ._runs import (
    SpanKind as SpanKind,
)
from ._runs import (
    run_spans as run_spans,
)
from ._sessions import describe_session as describe_session
from ._sessions import describe_sessions as describe_sessions
from ._sessions import fault_json as fault_json
from ._sessions import unknown_json as unknown_json
from ._unknown import UnknownType as UnknownType
from ._unknown import unknown_type as unknown_type

__all__ = (
    "counted",
    "event_json",
    "event_summary",
    "message_text",
    "timestamp",
    "describe_session",
    "describe_sessions",
    "fault_json",
    "unknown_json",
    "UnknownType",
    "unknown_type",
    "Loaded",
    "RunSpan",
    "SpanKind",
    "load_session",
    "run_spans",
    "FAILED_FATES",
    "FAILED_TURN_ENDS",
    "FINDING_STATES",
    "Fate",
    "PENDING_FATES",
    "call_approval",
    "SessionState",
    "call_arguments",
    "call_error",
    "call_fate",
    "call_row",
    "failed_attempts",
    "failed_turns",
    "result_fate",
    "session_state",
)
