"""agent: the durable agent loop built on eventlog, projections and recovery (DESIGN §8)."""

from .agent import Agent, TurnOutcome
from .assembly import Assembler, Reply
from .compaction import (
    AutoCompaction,
    CompactionResult,
    Summarizer,
    compact,
    compact_auto,
    estimate_tokens,
    model_summarizer,
    plan_auto,
)
from .errors import AgentBusyError, CompactionError, OpenTurnError
from .execution import (
    ABORTED_BEFORE_DISPATCH,
    CHECKPOINT_FAILED,
    INVALID_ARGUMENTS,
    OUTPUT_TOO_LARGE,
    TOOL_ERROR,
    TOOL_FAILED,
    UNKNOWN_TOOL,
    ExecutionReport,
    ToolExecutor,
)
from .inbox import Admission, prompt, submit
from .model import (
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
from .scripted import Response, ScriptedModel
from .tools import FunctionTool, Tool, ToolArgumentsError, Toolbox, ToolContext, ToolOutput, tool

__all__ = (
    "Admission",
    "Agent",
    "AgentBusyError",
    "AutoCompaction",
    "CompactionError",
    "CompactionResult",
    "OpenTurnError",
    "Summarizer",
    "TurnOutcome",
    "compact",
    "compact_auto",
    "estimate_tokens",
    "model_summarizer",
    "plan_auto",
    "prompt",
    "submit",
    "ABORTED_BEFORE_DISPATCH",
    "CHECKPOINT_FAILED",
    "INVALID_ARGUMENTS",
    "OUTPUT_TOO_LARGE",
    "TOOL_ERROR",
    "TOOL_FAILED",
    "UNKNOWN_TOOL",
    "Assembler",
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
    "ScriptedModel",
    "TextDelta",
    "Tool",
    "ToolArgumentsError",
    "ToolCallDelta",
    "ToolContext",
    "ToolExecutor",
    "ToolOutput",
    "Toolbox",
    "tool",
)
