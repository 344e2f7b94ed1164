"""Recovery: a read-only diagnosis of what a crash left open, and the repair that closes it.

docs/recovery.md. ``scan(session)`` reports; ``await repair(session)`` appends the closers and
flushes; ``await decide(session, call_id, ...)`` records a person's decision on a call a
waiting step holds (docs/approvals.md) and ``pending_approvals(session)`` lists those calls;
``recovery.testing`` helps property-test crash recovery. The error codes of tool results (the
agent's and repair's) are defined here once.
"""

from ._approvals import (
    ApprovalConflictError,
    ApprovalError,
    ApprovalRecord,
    PendingApproval,
    decide,
    pending_approvals,
    recorded_event,
)
from ._codes import (
    ABORTED_BEFORE_DISPATCH,
    APPROVAL_FAILED,
    CHECKPOINT_FAILED,
    INVALID_ARGUMENTS,
    OUTPUT_TOO_LARGE,
    TOOL_DENIED,
    TOOL_ERROR,
    TOOL_FAILED,
    TOOL_NOT_STARTED,
    TOOL_OUTCOME_UNKNOWN,
    UNKNOWN_TOOL,
)
from ._diagnosis import DanglingCall, DanglingKind, Diagnosis, scan
from ._repair import RepairReport, denied_text, not_started_text, outcome_unknown_text, repair

__all__ = (
    "ABORTED_BEFORE_DISPATCH",
    "APPROVAL_FAILED",
    "CHECKPOINT_FAILED",
    "INVALID_ARGUMENTS",
    "OUTPUT_TOO_LARGE",
    "TOOL_DENIED",
    "TOOL_ERROR",
    "TOOL_FAILED",
    "TOOL_NOT_STARTED",
    "TOOL_OUTCOME_UNKNOWN",
    "UNKNOWN_TOOL",
    "ApprovalConflictError",
    "ApprovalError",
    "ApprovalRecord",
    "PendingApproval",
    "decide",
    "pending_approvals",
    "recorded_event",
    "DanglingCall",
    "DanglingKind",
    "Diagnosis",
    "RepairReport",
    "denied_text",
    "not_started_text",
    "outcome_unknown_text",
    "repair",
    "scan",
)
