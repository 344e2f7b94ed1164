"""agent: the durable agent loop built on eventlog, projections and recovery (docs/architecture.md).

A minimal embedding (the model here is scripted; any :class:`Model` streams the same way)::

    from agent import Agent, Response, ScriptedModel, tool
    from eventlog import open_store

    @tool(safe=True)
    def read_file(path: str) -> str:
        '''Read a file.'''
        return open(path).read()

    async def main() -> None:
        async with open_store("sqlite:///sessions.db") as store:
            session = await store.create(session_id="demo")
            model = ScriptedModel([Response(tool_calls=[("read_file", '{"path": "x"}')]),
                                   Response(text="done")])
            agent = Agent(session, model, [read_file], system="You are helpful.")
            await agent.prompt("Read x, please.", request_id="req-1")  # admitted once
            await agent.run_until_idle()

After a crash, ``await Agent.resume(store, "demo", model, [read_file])`` repairs the session
(a call that may have run is answered ``TOOL_OUTCOME_UNKNOWN``) and continues its numbering.
"""

# The error codes of tool results are recovery's vocabulary (repair writes two of them); the
# agent re-exports the ones its executor writes, where its users have always found them.
from recovery import (
    ABORTED_BEFORE_DISPATCH,
    APPROVAL_FAILED,
    CHECKPOINT_FAILED,
    INVALID_ARGUMENTS,
    OUTPUT_TOO_LARGE,
    TOOL_DENIED,
    TOOL_ERROR,
    TOOL_FAILED,
    UNKNOWN_TOOL,
    ApprovalConflictError,
    ApprovalError,
    ApprovalRecord,
    PendingApproval,
)

from ._loop._agent import Agent, TurnOutcome, TurnOutcomeReason
from ._loop._assembly import Assembler, Reply
from ._loop._compaction import (
    AutoCompaction,
    CompactionResult,
    Summarizer,
    compact,
    compact_auto,
    estimate_tokens,
    model_summarizer,
    plan_auto,
)
from ._loop._errors import AgentBusyError, AgentConfigError, CompactionError, OpenTurnError
from ._loop._execution import ExecutionReport, ToolExecutor
from ._loop._hooks import Block, StepContext, StepPlan, StepSettings
from ._loop._inbox import Admission, prompt, submit
from ._loop._model import (
    Chunk,
    Finish,
    FinishKind,
    Model,
    ModelError,
    ModelRequest,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
)
from ._loop._retry import RetryPolicy
from ._loop._scripted import Response, ScriptedModel
from ._loop._tools import (
    Approval,
    FunctionTool,
    Tool,
    ToolArgumentsError,
    Toolbox,
    ToolContext,
    ToolOutput,
    as_tool,
    tool,
)

__all__ = (
    "Admission",
    "Agent",
    "AgentBusyError",
    "ApprovalConflictError",
    "ApprovalError",
    "ApprovalRecord",
    "PendingApproval",
    "AgentConfigError",
    "AutoCompaction",
    "CompactionError",
    "CompactionResult",
    "OpenTurnError",
    "Summarizer",
    "TurnOutcome",
    "TurnOutcomeReason",
    "compact",
    "compact_auto",
    "estimate_tokens",
    "model_summarizer",
    "plan_auto",
    "prompt",
    "submit",
    "ABORTED_BEFORE_DISPATCH",
    "APPROVAL_FAILED",
    "CHECKPOINT_FAILED",
    "INVALID_ARGUMENTS",
    "OUTPUT_TOO_LARGE",
    "TOOL_DENIED",
    "TOOL_ERROR",
    "TOOL_FAILED",
    "UNKNOWN_TOOL",
    "Approval",
    "Assembler",
    "Block",
    "Chunk",
    "ExecutionReport",
    "Finish",
    "FinishKind",
    "FunctionTool",
    "Model",
    "ModelError",
    "ModelRequest",
    "ReasoningDelta",
    "Reply",
    "Response",
    "RetryPolicy",
    "ScriptedModel",
    "StepContext",
    "StepPlan",
    "StepSettings",
    "TextDelta",
    "Tool",
    "ToolArgumentsError",
    "ToolCallDelta",
    "ToolContext",
    "ToolExecutor",
    "ToolOutput",
    "Toolbox",
    "as_tool",
    "tool",
)
