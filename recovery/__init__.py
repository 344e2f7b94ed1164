"""Recovery: a read-only diagnosis of what a crash left open, and the repair that closes it.

docs/recovery.md. ``scan(session)`` reports; ``await repair(session)`` appends the closers and
flushes; ``recovery.testing`` helps property-test crash recovery.
"""

from ._diagnosis import DanglingCall, DanglingKind, Diagnosis, scan
from ._repair import (
    TOOL_NOT_STARTED,
    TOOL_OUTCOME_UNKNOWN,
    RepairReport,
    not_started_text,
    outcome_unknown_text,
    repair,
)

__all__ = (
    "TOOL_NOT_STARTED",
    "TOOL_OUTCOME_UNKNOWN",
    "DanglingCall",
    "DanglingKind",
    "Diagnosis",
    "RepairReport",
    "not_started_text",
    "outcome_unknown_text",
    "repair",
    "scan",
)
