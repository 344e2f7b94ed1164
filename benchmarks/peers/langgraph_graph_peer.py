"""A real LangGraph agent graph on ``SqliteSaver``, its messages in a ``DeltaChannel``.

The ``langgraph_peer`` rows drive the checkpointer directly and store the whole history in every
checkpoint (the default ``add_messages`` channel), a lower bound of LangGraph's cost that grows
with the square of the session length. This row is the other end: what an agent built on
LangGraph runs — a compiled ``StateGraph`` with a model node and a tool node looping three
times per turn, invoked once per turn — with the messages in LangGraph's ``DeltaChannel`` (beta,
opt-in), which stores each super-step's new messages and a full snapshot every 100 updates, so
storage grows linearly. The nodes return the workload's messages (no model is called), so the
figures are LangGraph's runtime and persistence, not a model's latency.

Equivalent of the workload: per turn the graph receives the user message; the model node returns
the step's ``AIMessage`` (one tool call), the tool node its ``ToolMessage``, three times. That
is seven super-steps, each followed by a checkpoint and the tasks' pending writes.

Durability: the saver enables WAL and leaves ``synchronous`` at SQLite's default (FULL on this
build, read back and reported); the graph's default ``durability="async"`` writes each
checkpoint while the next step runs and ``invoke`` returns only once they are all committed, so
each turn is durable when its ``invoke`` returns. Sessions are written up to
:data:`MAX_TURNS` turns (about 17 ms of CPU per turn here; longer would exceed the run's time
budget).

Load path: ``graph.get_state(config)`` reads the latest checkpoint and replays the delta writes
since the last snapshot through the reducer, rebuilding each message with its pydantic
constructor. It validates message fields; it has no integrity check.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from ._common import Stopwatch, Timing, WriteResult, durability_settings
from .langgraph_peer import step_messages

__all__ = ("MAX_TURNS", "LangGraphDeltaGraph")

#: The longest session written (time budget).
MAX_TURNS = 1_000
_THREAD = "lg-graph-thread"
_STEPS = 3


def _add_batches(state: list[BaseMessage], batches: Sequence[Any]) -> list[BaseMessage]:
    """``add_messages`` over a batch of writes, as ``DeltaChannel`` calls its reducer."""
    for batch in batches:
        state = add_messages(state, batch)  # type: ignore[arg-type, assignment, unused-ignore]
    return state


class _State(TypedDict):
    messages: Annotated[list[BaseMessage], DeltaChannel(_add_batches, snapshot_frequency=100)]


class _Script:
    """The messages of the turn being run, handed to the nodes."""

    def __init__(self) -> None:
        self.steps: list[list[BaseMessage]] = []

    def step_of(self, messages: list[BaseMessage]) -> int:
        """How many assistant messages this turn has so far (the last user message starts it)."""
        count = 0
        for message in reversed(messages):
            if isinstance(message, HumanMessage):
                return count
            if isinstance(message, AIMessage):
                count += 1
        return count

    def model(self, state: _State) -> dict[str, Any]:
        step = self.step_of(state["messages"])
        return {"messages": [m for m in self.steps[step] if isinstance(m, AIMessage)]}

    def tools(self, state: _State) -> dict[str, Any]:
        step = self.step_of(state["messages"]) - 1
        return {"messages": [self.steps[step][-1]]}

    def route(self, state: _State) -> str:
        return END if self.step_of(state["messages"]) == _STEPS else "model"


def _graph(script: _Script, saver: SqliteSaver) -> Any:
    graph = StateGraph(_State)
    graph.add_node("model", script.model)
    graph.add_node("tools", script.tools)
    graph.add_edge(START, "model")
    graph.add_edge("model", "tools")
    graph.add_conditional_edges("tools", script.route, ["model", END])
    return graph.compile(checkpointer=saver)


class LangGraphDeltaGraph:
    """A compiled LangGraph agent graph, ``DeltaChannel`` messages, ``SqliteSaver`` on a file."""

    name = "langgraph graph + DeltaChannel"
    package = "langgraph"
    durability = (
        "WAL (library), synchronous=FULL (SQLite default), a checkpoint per super-step, "
        "all committed when invoke returns"
    )
    validates = "message fields (pydantic, falls back to unvalidated)"
    validating = True
    concurrent_note = "not run (time budget)"

    def write(self, path: Path, turns: int) -> WriteResult:
        script = _Script()
        with SqliteSaver.from_conn_string(str(path)) as saver:
            graph = _graph(script, saver)
            config: RunnableConfig = {"configurable": {"thread_id": _THREAD}}
            with Stopwatch() as watch:
                for turn in range(1, turns + 1):
                    script.steps = step_messages(turn)
                    graph.invoke({"messages": [script.steps[0][0]]}, config)
            settings = durability_settings(saver.conn)
        return WriteResult(watch.timing, _THREAD, settings)

    def reload(self, path: Path, session_id: str) -> Timing:
        with SqliteSaver.from_conn_string(str(path)) as saver:
            graph = _graph(_Script(), saver)
            config: RunnableConfig = {"configurable": {"thread_id": session_id}}
            with Stopwatch() as watch:
                state = graph.get_state(config)
        assert state.values["messages"], "the session must not be empty"
        return watch.timing

    def max_turns(self) -> int | None:
        return MAX_TURNS

    def max_runs(self, turns: int) -> int | None:
        """Fewer runs of the long sessions, each of which takes tens of seconds."""
        return 3 if turns > 100 else None
