"""Planning one agent run: the decisions, and the state their validity depends on.

:class:`Planner` takes every decision from a ``choose(low, high)`` function and keeps what a
well-formed log needs in step with it: seqs (for ``Replace`` spans and ``sources``), the
surface with its call/result balance (so a compaction only replaces a balanced span), the
inbox lists (so splices have valid coordinates) and each step's tool calls (started in any
order, finished in any order, answered in the model's order).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from eventlog import (
    APPEND,
    AssistantAttempt,
    AssistantMessage,
    CompactionEnd,
    CompactionStart,
    CompactionSummary,
    FinishReason,
    InboxItem,
    InboxSpliced,
    InboxTarget,
    Message,
    MessageSource,
    Replace,
    RequestHeader,
    StepEnd,
    StepStart,
    SurfaceOp,
    TextPart,
    ToolCall,
    ToolCallPart,
    ToolError,
    ToolOutcome,
    ToolResult,
    ToolResultPart,
    ToolSpec,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    UserMessage,
)

from .._codes import ABORTED_BEFORE_DISPATCH, TOOL_FAILED

__all__ = ("Choose", "PlannedEvent", "Planner", "plan")

#: ``choose(low, high)`` returns an integer in ``[low, high]``; it drives every decision.
Choose = Callable[[int, int], int]


class PlannedEvent(NamedTuple):
    """One event of a run; ``checkpoint`` means the agent flushes right after it."""

    type: str
    data: Any
    surface: SurfaceOp | None = None
    sources: tuple[int, ...] = ()
    checkpoint: bool = False


def plan(
    choose: Choose, *, max_turns: int = 3, max_steps: int = 3, max_calls: int = 3
) -> tuple[PlannedEvent, ...]:
    """The events of one run, every decision taken from ``choose``."""
    planner = Planner(choose, max_steps=max_steps, max_calls=max_calls)
    if choose(0, 1):
        tools = (ToolSpec(name="read", description="Read a file"), ToolSpec(name="write"))
        planner.add("request/header", RequestHeader(system="Be brief.", tools=tools, model="m"))
    for turn in range(1, choose(0, max_turns) + 1):
        planner.between_turns()
        planner.turn(turn)
    return tuple(planner.events)


class Planner:
    """Plans events while tracking what validity depends on: seqs, surface, inbox."""

    def __init__(self, choose: Choose, *, max_steps: int, max_calls: int) -> None:
        self.choose = choose
        self.max_steps = max_steps
        self.max_calls = max_calls
        self.events: list[PlannedEvent] = []
        # The surface: (seq, calls minus results) per node, and tool/result payloads by seq.
        self.surface: list[tuple[int, int]] = []
        self.results: dict[int, ToolResult] = {}
        self.next_turn: list[str] = []
        self.next_step: list[str] = []
        self.items: dict[str, InboxItem] = {}
        self.counter = 0

    # -- bookkeeping ---------------------------------------------------------------------------

    def chance(self, percent: int) -> bool:
        return self.choose(1, 100) <= percent

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def add(
        self,
        type_: str,
        data: Any,
        surface: SurfaceOp | None = None,
        sources: Sequence[int] = (),
        *,
        checkpoint: bool = False,
    ) -> int:
        seq = len(self.events)
        self.events.append(PlannedEvent(type_, data, surface, tuple(sources), checkpoint))
        if surface is not None:
            message: Message = data.message
            delta = len(message.tool_calls) - len(message.tool_results)
            if isinstance(surface, Replace):
                first = next(i for i, (s, _) in enumerate(self.surface) if s == surface.start)
                last = next(i for i, (s, _) in enumerate(self.surface) if s == surface.end)
                self.surface[first : last + 1] = [(seq, delta)]
            else:
                self.surface.append((seq, delta))
            if isinstance(data, ToolResult):
                self.results[seq] = data
        return seq

    def checkpoint(self) -> None:
        """The agent flushes after the last event (e.g. before sending a model request)."""
        if self.events:
            self.events[-1] = self.events[-1]._replace(checkpoint=True)

    # -- between turns -------------------------------------------------------------------------

    def between_turns(self) -> None:
        for _ in range(self.choose(0, 2)):
            self.enqueue("next-turn")
        if self.next_turn and self.chance(20):
            self.cancel_item()
        if self.chance(25):
            self.compact()
        if self.chance(25):
            self.prune()

    def enqueue(self, target: InboxTarget) -> None:
        item_id = self.fresh("q")
        message = Message.user(f"queued input {item_id}", id=item_id)
        item = InboxItem(id=item_id, message=message, wake=target == "next-turn" or self.chance(70))
        self.items[item_id] = item
        queue = self.next_turn if target == "next-turn" else self.next_step
        self.add(
            "agent/inbox/spliced",
            InboxSpliced(target=target, start=len(queue), inserted=(item,)),
            checkpoint=True,
        )
        queue.append(item_id)

    def cancel_item(self) -> None:
        position = self.choose(0, len(self.next_turn) - 1)
        del self.next_turn[position]
        splice = InboxSpliced(target="next-turn", start=position, removed=1, outcome="canceled")
        self.add("agent/inbox/spliced", splice, checkpoint=True)

    def compact(self) -> None:
        """Replace a balanced span of the surface with a checkpoint user message."""
        balance, starts, spans = 0, list[int](), list[tuple[int, int]]()
        for position, (_, delta) in enumerate(self.surface):
            if balance == 0:
                starts.append(position)
            balance += delta
            if balance == 0:
                spans.extend((start, position) for start in starts)
        if not spans:
            return
        first, last = spans[self.choose(0, len(spans) - 1)]
        shadowed = [seq for seq, _ in self.surface[first : last + 1]]
        start = self.add("compaction/start", CompactionStart(start=shadowed[0], end=shadowed[-1]))
        self.add("compaction/summary", CompactionSummary(text=f"summary of {len(shadowed)}"))
        message = Message(
            id=self.fresh("c"),
            role="user",
            content=(TextPart(text=f"Summary of the conversation so far ({len(shadowed)})."),),
            source=MessageSource(kind="compaction"),
        )
        checkpoint = self.add(
            "user/message",
            UserMessage(message=message),
            Replace(shadowed[0], shadowed[-1]),
            sorted({*shadowed, start}),
        )
        self.add("compaction/end", CompactionEnd(checkpoint=checkpoint), checkpoint=True)

    def prune(self) -> None:
        """Replace the content of one tool result on the surface (pruning)."""
        candidates = [seq for seq, _ in self.surface if seq in self.results]
        if not candidates:
            return
        seq = candidates[self.choose(0, len(candidates) - 1)]
        old = self.results[seq]
        part = old.message.content[0]
        assert isinstance(part, ToolResultPart)
        new_part = ToolResultPart(call_id=part.call_id, content="[pruned]", is_error=part.is_error)
        message = Message(
            id=self.fresh("p"), role="tool", content=(new_part,), source=old.message.source
        )
        pruned = ToolResult(turn=old.turn, step=old.step, message=message, error=old.error)
        self.add("tool/result", pruned, Replace(seq, seq), (seq,), checkpoint=True)

    # -- a turn --------------------------------------------------------------------------------

    def turn(self, turn: int) -> None:
        self.add("turn/start", TurnStart(turn=turn))
        if self.next_turn and self.chance(70):
            self.claim(first_of_next_turn=True)
        else:
            text = f"request {turn}"
            self.add(
                "user/message", UserMessage(message=Message.user(text, id=self.fresh("u"))), APPEND
            )
        steps = self.choose(1, self.max_steps)
        reason: TurnEndReason = "completed"
        for step in range(1, steps + 1):
            reason = self.step(turn, step, last=step == steps)
            if reason != "completed":
                break
        self.add("turn/end", TurnEnd(turn=turn, reason=reason), checkpoint=True)

    def claim(self, *, first_of_next_turn: bool) -> None:
        claimed = list(self.next_step)
        if self.next_step:
            splice = InboxSpliced(
                target="next-step", start=0, removed=len(self.next_step), outcome="claimed"
            )
            self.add("agent/inbox/spliced", splice)
            self.next_step.clear()
        if first_of_next_turn and self.next_turn:
            splice = InboxSpliced(target="next-turn", start=0, removed=1, outcome="claimed")
            self.add("agent/inbox/spliced", splice)
            claimed.append(self.next_turn.pop(0))
        for item_id in claimed:
            self.add("user/message", UserMessage(message=self.items[item_id].message), APPEND)

    def step(self, turn: int, step: int, *, last: bool) -> TurnEndReason:
        self.add("step/start", StepStart(turn=turn, step=step))
        if step > 1 and self.next_step:
            self.claim(first_of_next_turn=False)
        if self.chance(15):
            self.checkpoint()
            self.add(
                "assistant/attempt", AssistantAttempt(turn=turn, step=step, error="overloaded")
            )
        self.checkpoint()  # flushed before the model request is sent
        kind = self.choose(0, 9)
        if kind <= 5 and not last:
            reason = self.tool_step(turn, step)
        elif kind == 6:
            reason = self.reply(turn, step, "", "stop", "completed")
        elif kind == 7:
            reason = self.reply(turn, step, "I was interrupted", "canceled", "aborted")
        elif kind == 8:
            reason = self.reply(turn, step, "This answer is too lo", "max-tokens", "max-tokens")
        else:
            reason = self.reply(turn, step, f"Done with {turn}.", "stop", "completed")
        self.add("step/end", StepEnd(turn=turn, step=step), checkpoint=True)
        return reason

    def reply(
        self, turn: int, step: int, text: str, finish: FinishReason, reason: TurnEndReason
    ) -> TurnEndReason:
        interrupted = finish in ("canceled", "max-tokens")
        message = Message.assistant(
            text, reasoning="hmm" if self.chance(30) else "", id=self.fresh("a")
        )
        data = AssistantMessage(
            turn=turn, step=step, message=message, finish=finish, interrupted=interrupted
        )
        self.add("assistant/message", data, APPEND)
        return reason

    def tool_step(self, turn: int, step: int) -> TurnEndReason:
        k = self.choose(1, self.max_calls)
        calls = tuple(
            ToolCallPart(
                id=f"call-{turn}-{step}-{i}", name=("read", "write")[i % 2], arguments="{}"
            )
            for i in range(k)
        )
        message = Message.assistant("Let me look.", tool_calls=calls, id=self.fresh("a"))
        proposal = AssistantMessage(turn=turn, step=step, message=message, finish="tool-calls")
        self.add("assistant/message", proposal, APPEND)
        tools = _ToolCalls(self, turn, step, calls)
        cancel_after = self.choose(0, 2 * k) if self.chance(20) else None
        actions = 0
        while not tools.settled():
            if cancel_after is not None and actions >= cancel_after:
                tools.cancel()
                return "aborted"
            if self.chance(10):
                self.enqueue("next-step")  # a steer while tools run
            choices = tools.choices()
            tools.act(*choices[self.choose(0, len(choices) - 1)])
            actions += 1
        return "completed"


class _ToolCalls:
    """The tool calls of one step: start in any order, finish in any order, answer in order."""

    def __init__(
        self, planner: Planner, turn: int, step: int, calls: tuple[ToolCallPart, ...]
    ) -> None:
        self.planner = planner
        self.turn = turn
        self.step = step
        self.calls = calls
        self.started = [False] * len(calls)
        self.finished = [False] * len(calls)
        self.outcomes: dict[int, ToolOutcome] = {}
        self.outcome_seqs: dict[int, int] = {}
        self.answered = 0  # results are committed in the model's order

    def settled(self) -> bool:
        return self.answered == len(self.calls)

    def choices(self) -> list[tuple[str, int]]:
        starts = [("start", i) for i, s in enumerate(self.started) if not s]
        finishes = [("finish", i) for i, f in enumerate(self.finished) if self.started[i] and not f]
        return starts + finishes

    def act(self, action: str, i: int) -> None:
        if action == "start":
            self.start(i)
        else:
            self.finish(i)

    def start(self, i: int) -> None:
        call = self.calls[i]
        data = ToolCall(
            turn=self.turn,
            step=self.step,
            call_id=call.id,
            name=call.name,
            arguments=call.arguments,
        )
        self.planner.add("tool/call", data, checkpoint=True)  # flushed before the body runs
        self.started[i] = True

    def output(self, i: int) -> tuple[Message, ToolError | None]:
        failed = self.planner.chance(15)
        call_id = self.calls[i].id
        text = f"error in {call_id}" if failed else f"output of {call_id}"
        message = Message.tool_result(call_id, text, is_error=failed, id=f"r-{call_id}")
        return message, ToolError(name="ToolError", code=TOOL_FAILED) if failed else None

    def finish(self, i: int) -> None:
        self.finished[i] = True
        message, error = self.output(i)
        if i != self.answered:
            # Finished ahead of an earlier call: made durable at once, answered later.
            outcome = ToolOutcome(
                turn=self.turn,
                step=self.step,
                call_id=self.calls[i].id,
                result=message,
                error=error,
            )
            self.outcome_seqs[i] = self.planner.add("tool/outcome", outcome, checkpoint=True)
            self.outcomes[i] = outcome
            return
        self.answer(ToolResult(turn=self.turn, step=self.step, message=message, error=error))
        self.answer_ready()

    def answer(self, data: ToolResult, sources: tuple[int, ...] = ()) -> None:
        self.planner.add("tool/result", data, APPEND, sources)
        self.answered += 1

    def answer_ready(self) -> None:
        while self.answered in self.outcomes:
            i = self.answered
            outcome = self.outcomes[i]
            data = ToolResult(
                turn=self.turn, step=self.step, message=outcome.result, error=outcome.error
            )
            self.answer(data, (self.outcome_seqs[i],))

    def cancel(self) -> None:
        """Start nothing new, drain started calls, answer unstarted ones as aborted."""
        for i in range(len(self.calls)):
            if self.started[i] and not self.finished[i]:
                self.finish(i)
        while not self.settled():
            i = self.answered
            if self.started[i]:
                self.answer_ready()
                continue
            self.start(i)
            call_id = self.calls[i].id
            message = Message.tool_result(
                call_id, "aborted before dispatch: it did not run", is_error=True, id=f"r-{call_id}"
            )
            error = ToolError(name="AbortError", code=ABORTED_BEFORE_DISPATCH)
            self.answer(ToolResult(turn=self.turn, step=self.step, message=message, error=error))
            self.finished[i] = True
            self.answer_ready()
