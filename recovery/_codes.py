"""The error codes of ``tool/result`` events: one vocabulary for every writer of results.

``ToolError.code`` says, in a word a program can match, why a call has an error result. Two
writers produce them: the agent's tool executor (``agent.execution``) and :func:`recovery.repair`.
They live here, in the lowest layer that writes any of them (the agent imports recovery), so
each code has one definition and readers (the audit, the OpenTelemetry export, the testing
plans) match the same constants.
"""

from __future__ import annotations

# No __all__: a private module; recovery/__init__.py re-exports every code.

# -- written by the agent ----------------------------------------------------------------------

#: The run was cancelled before the call started: it did not run.
ABORTED_BEFORE_DISPATCH = "ABORTED_BEFORE_DISPATCH"
#: The model named a tool the toolbox does not have: nothing ran.
UNKNOWN_TOOL = "UNKNOWN_TOOL"
#: The call's arguments did not decode for the tool: nothing ran.
INVALID_ARGUMENTS = "INVALID_ARGUMENTS"
#: The tool's body raised.
TOOL_FAILED = "TOOL_FAILED"
#: The tool returned an error result without a code of its own.
TOOL_ERROR = "TOOL_ERROR"
#: A checkpoint could not be made durable (the call's start, or its result's attachments).
CHECKPOINT_FAILED = "CHECKPOINT_FAILED"
#: The tool's output was over the session's per-event limit and was dropped.
OUTPUT_TOO_LARGE = "OUTPUT_TOO_LARGE"

#: A person denied the call (``tool/approval`` with ``deny``): it did not run. Written by the
#: agent, and by repair for a denied call a crash left unanswered.
TOOL_DENIED = "TOOL_DENIED"
#: The tool's approval policy raised while the step's calls were being classified: no call
#: of the step ran, and the turn ended ``error``.
APPROVAL_FAILED = "APPROVAL_FAILED"

# -- written by recovery -----------------------------------------------------------------------

#: A call whose ``tool/call`` was logged but whose outcome was not: it may have run.
TOOL_OUTCOME_UNKNOWN = "TOOL_OUTCOME_UNKNOWN"
#: A proposed call that never started: it had no effect.
TOOL_NOT_STARTED = "TOOL_NOT_STARTED"
