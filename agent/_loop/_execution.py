"""Ordered parallel execution of one step's tool calls.

Scheduling: calls are taken in the model's order. A concurrency-safe call joins a pool of at
most ``max_parallel`` calls in flight; any other call is an exclusive barrier (it starts when
nothing is in flight, and nothing starts while it runs). Each call is classified right before it
starts, so a result that changes a tool's mind creates a barrier in time.

Durability: a call's ``tool/call`` is committed and flushed before its body runs, so recovery
can tell "may have run" (``TOOL_OUTCOME_UNKNOWN``) from "never started". Results are committed
as ``tool/result`` strictly in the model's order; a body that finishes before an earlier call
has its result made durable at once as ``tool/outcome``, so a crash does not lose it.

Calls that cannot run (unknown tool, invalid argument JSON) get a ``tool/call`` and an error
result without running anything; behind an earlier call still open, that error is made durable
as ``tool/outcome`` at once, as a finished body's result is. A :class:`Carry` names what the
step already holds (calls answered before, calls waiting for a person's decision, answers
decided without running): those are never started; a held call leaves the results after it
as ``tool/outcome`` s until a later run of the step answers it (docs/approvals.md).

Cancel: nothing new starts, started bodies are drained, and every unstarted call (a held one
too) is answered by a ``tool/call`` + ``tool/result`` pair coded
``ABORTED_BEFORE_DISPATCH``, so a cancelled step is always balanced.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import anyio
import msgspec
from anyio.abc import TaskGroup

from eventlog import (
    APPEND,
    Event,
    EventLogError,
    Message,
    ResultPart,
    Session,
    ToolCall,
    ToolCallPart,
    ToolError,
    ToolOutcome,
    ToolResult,
)
from recovery import (
    ABORTED_BEFORE_DISPATCH,
    CHECKPOINT_FAILED,
    INVALID_ARGUMENTS,
    OUTPUT_TOO_LARGE,
    TOOL_ERROR,
    TOOL_FAILED,
    UNKNOWN_TOOL,
)

from ._attachments import AttachmentCache
from ._checks import check_count, refuse
from ._tools import Tool, Toolbox, ToolContext, ToolOutput, as_output

__all__ = (
    "Carry",
    "ExecutionReport",
    "ToolExecutor",
    "carried_answer",
    "carried_outcome",
)

logger = logging.getLogger("agent.execution")
_json = msgspec.json.Encoder()

# Room left for the rest of a result event around the tool's content.
_ENVELOPE_ROOM = 64 * 1024

_ABORTED_TEXT = (
    "tool call aborted before dispatch: the run was cancelled before this call started; "
    "it did not run"
)


@dataclass(frozen=True, slots=True)
class _Settled:
    """A call's result waiting for its turn in the model's order."""

    content: str | tuple[ResultPart, ...]
    error: ToolError | None = None
    concludes: bool = False
    #: The ``tool/outcome`` that made this result durable ahead of its turn, if any.
    outcome: Event | None = None
    #: What the tool adds to the next step's request, recorded with the result.
    context: Message | None = None
    #: The seqs the ``tool/result`` cites instead of the call's ``tool/call`` (an answer
    #: given without running the call, e.g. a denial citing its ``tool/approval``).
    sources: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class Carry:
    """What a step already holds when :meth:`ToolExecutor.run` takes its calls.

    :ivar answered: how many calls, from the first, already have their ``tool/result``.
    :ivar held: calls waiting for a decision: not started, not answered by this run.
    :ivar answers: results to commit in their turn without running the call
        (:func:`carried_answer`, :func:`carried_outcome`).
    :ivar call_seqs: the ``tool/call`` seqs already logged.
    """

    answered: int = 0
    held: frozenset[int] = frozenset()
    answers: Mapping[int, _Settled] = field(default_factory=dict)
    call_seqs: Mapping[int, int] = field(default_factory=dict)

    def skips(self, index: int) -> bool:
        """True when call ``index`` is not the executor's to start."""
        return index < self.answered or index in self.held or index in self.answers


def carried_answer(
    content: str, name: str, code: str, sources: tuple[int, ...] | None = None
) -> _Settled:
    """An error result, citing ``sources`` (by default the call's ``tool/call``, if any)."""
    return _Settled(content=content, error=ToolError(name=name, code=code), sources=sources)


def carried_outcome(outcome: Event) -> _Settled:
    """The result a ``tool/outcome`` recorded (the call's ``tool/call`` is in the carry)."""
    data: ToolOutcome = outcome.data
    return _Settled(content="", error=data.error, outcome=outcome, context=data.context)


@dataclass(frozen=True, slots=True)
class ExecutionReport:
    """What happened to one step's calls.

    :ivar result_seqs: the ``tool/result`` seqs, in the model's order.
    :ivar concluded: a successful result asked to conclude the turn.
    :ivar aborted: how many calls were answered ``ABORTED_BEFORE_DISPATCH``.
    :ivar held: how many calls wait for a decision, unanswered (the step waits).
    """

    result_seqs: tuple[int, ...]
    concluded: bool
    aborted: int
    held: int = 0


class ToolExecutor:
    """Runs the calls of one step (see the module docstring). One instance per step.

    :param cancel: set by the agent's ``cancel()``; checked before every start.
    :param max_parallel: at most this many safe calls in flight (>= 1).
    :param attachments: stores the images and files a tool returns inline as attachments
        before their result (or outcome) is committed; without it they stay inline.
    :raises AgentConfigError: (at construction) ``toolbox`` is not a :class:`Toolbox` or
        ``max_parallel`` not a positive integer.
    """

    def __init__(
        self,
        session: Session,
        toolbox: Toolbox,
        *,
        turn: int,
        step: int,
        cancel: anyio.Event,
        max_parallel: int = 10,
        attachments: AttachmentCache | None = None,
    ) -> None:
        if not isinstance(toolbox, Toolbox):
            raise refuse("ToolExecutor", "toolbox", "a Toolbox", toolbox)
        check_count("ToolExecutor", "max_parallel", max_parallel, 1)
        self.session = session
        self.toolbox = toolbox
        self.turn = turn
        self.step = step
        self.cancel = cancel
        self.max_parallel = max_parallel
        #: Stores what a tool returns inline (without a store, it stays inline).
        self.attachments = attachments or AttachmentCache(session, None)
        self._calls: Sequence[ToolCallPart] = ()
        self._slots: list[_Settled | None] = []
        self._call_seqs: list[int | None] = []
        self._result_seqs: list[int] = []
        self._committed = 0
        self._in_flight = 0
        self._changed = anyio.Event()
        self._source: tuple[int, ...] = ()
        self._carry = Carry()

    async def run(
        self,
        calls: Sequence[ToolCallPart],
        *,
        assistant_seq: int | None = None,
        carry: Carry | None = None,
    ) -> ExecutionReport:
        """Execute ``calls`` (the model's order) and commit one ``tool/result`` for each, but
        for those ``carry`` says were answered already or wait for a decision."""
        carry = self._carry = carry or Carry()
        self._calls = calls
        self._slots = [None] * len(calls)
        self._call_seqs = [carry.call_seqs.get(index) for index in range(len(calls))]
        self._source = () if assistant_seq is None else (assistant_seq,)
        self._committed = carry.answered
        for index in sorted(carry.answers):
            self._fill(index, carry.answers[index])
        started = 0
        async with anyio.create_task_group() as tg:
            watcher = anyio.CancelScope()
            tg.start_soon(self._watch_cancel, watcher)
            started = await self._schedule(tg)
            await self._wait(lambda: self._in_flight == 0, or_cancel=False)
            watcher.cancel()
        aborted = 0
        for index in range(len(calls)):
            unstarted = index >= started and not carry.skips(index)
            if not (unstarted or (index in carry.held and self.cancel.is_set())):
                continue
            if self._call_seqs[index] is None:
                self._log_call(index)
            self._fill(index, carried_answer(_ABORTED_TEXT, "AbortError", ABORTED_BEFORE_DISPATCH))
            aborted += 1
        concluded = any(s is not None and s.concludes for s in self._slots)
        held = sum(1 for index in carry.held if self._slots[index] is None)
        return ExecutionReport(tuple(self._result_seqs), concluded, aborted=aborted, held=held)

    async def _schedule(self, tg: TaskGroup) -> int:
        """Start calls until all started or cancelled; return how many were taken."""
        calls, index, skips = self._calls, 0, self._carry.skips
        while index < len(calls) and not self.cancel.is_set():
            if skips(index):
                index += 1
                continue
            plan = self._plan(calls[index])
            if isinstance(plan, _Settled):
                self._log_call(index)
                if index != self._committed:
                    # Behind a call still running or waiting for a decision: recorded now, as a
                    # finished body's result is, so a step gone on from the log (after the
                    # decision, in another process) answers what it was, not "may have run".
                    plan = await self._make_durable(index, plan)
                self._fill(index, plan)
                index += 1
                continue
            tool, args = plan
            if not self._is_safe(tool, args):
                if self._in_flight:
                    await self._wait(lambda: self._in_flight == 0, or_cancel=True)
                    continue  # classify again: the finished calls may have changed things
                await self._start(tg, [(index, tool, args)])
                index += 1
                await self._wait(lambda: self._in_flight == 0, or_cancel=False)
                continue
            if self._in_flight >= self.max_parallel:
                await self._wait(lambda: self._in_flight < self.max_parallel, or_cancel=True)
                continue
            batch = [(index, tool, args)]
            index += 1
            while index < len(calls) and self._in_flight + len(batch) < self.max_parallel:
                if skips(index):
                    break
                more = self._plan(calls[index])
                if isinstance(more, _Settled) or not self._is_safe(*more):
                    break
                batch.append((index, *more))
                index += 1
            await self._start(tg, batch)
        return index

    def _plan(self, call: ToolCallPart) -> tuple[Tool, object] | _Settled:
        tool = self.toolbox.get(call.name)
        if tool is None:
            return carried_answer(
                f"unknown tool {call.name!r}; available: "
                + (", ".join(t.name for t in self.toolbox) or "none"),
                "UnknownToolError",
                UNKNOWN_TOOL,
            )
        try:
            return tool, tool.decode(call.arguments)
        except ValueError as exc:  # ToolArgumentsError, or a decoder's own ValueError
            return carried_answer(str(exc), "ToolArgumentsError", INVALID_ARGUMENTS)
        except Exception as exc:  # a custom decoder that broke: the call is not run either
            logger.exception("agent: decode of tool %r failed", call.name)
            text = f"the arguments could not be decoded: {type(exc).__name__}: {exc}"
            return carried_answer(text, "ToolArgumentsError", INVALID_ARGUMENTS)

    @staticmethod
    def _is_safe(tool: Tool, args: object) -> bool:
        try:
            return tool.is_concurrency_safe(args) is True
        except Exception:
            logger.exception("agent: is_concurrency_safe of %r failed; running it alone", tool)
            return False  # fail closed: an unsure call is a barrier

    async def _start(self, tg: TaskGroup, batch: list[tuple[int, Tool, object]]) -> None:
        """Commit the batch's ``tool/call`` s, flush once, then start the bodies."""
        for index, _tool, _args in batch:
            self._log_call(index)
        try:
            await self.session.flush()
        except EventLogError as exc:
            for index, _tool, _args in batch:
                text = f"the call was not run: its start could not be made durable ({exc})"
                self._fill(index, carried_answer(text, type(exc).__name__, CHECKPOINT_FAILED))
            return
        for index, tool, args in batch:
            if self.cancel.is_set():
                # Cancelled while the checkpoint was written: the body never runs.
                error = carried_answer(_ABORTED_TEXT, "AbortError", ABORTED_BEFORE_DISPATCH)
                self._fill(index, error)
                continue
            self._in_flight += 1
            tg.start_soon(self._body, index, tool, args)

    async def _body(self, index: int, tool: Tool, args: object) -> None:
        call = self._calls[index]
        context = ToolContext(self.session, self.turn, self.step, call.id, self.cancel)
        try:
            settled = _settled_from(as_output(await tool.call(args, context)))
        except Exception as exc:
            logger.info("agent: tool %r (call %s) raised %r", call.name, call.id, exc)
            settled = carried_answer(
                f"{type(exc).__name__}: {exc}", type(exc).__name__, TOOL_FAILED
            )
        settled = self._bounded(await self._store_media(settled))
        try:
            if index != self._committed:
                settled = await self._make_durable(index, settled)
            self._fill(index, settled)
        finally:
            self._in_flight -= 1
            self._changed.set()

    async def _store_media(self, settled: _Settled) -> _Settled:
        """The result with its inline images and files stored as attachments (before the
        result or outcome referencing them is committed); a result whose media could not be
        stored becomes an error result saying so."""
        try:
            return replace(settled, content=await self.attachments.stored(settled.content))
        except EventLogError as exc:
            text = f"the tool's result was dropped: its attachments could not be stored ({exc})"
            return carried_answer(text, type(exc).__name__, CHECKPOINT_FAILED)

    def _bounded(self, settled: _Settled) -> _Settled:
        """An output too large for one event becomes an error result (the log refuses it)."""
        content = settled.content
        size = len(content.encode() if isinstance(content, str) else _json.encode(content))
        size += len(_json.encode(settled.context)) if settled.context is not None else 0
        if size <= self.session.max_event_bytes - _ENVELOPE_ROOM:
            return settled
        text = (
            f"the tool output was {size} bytes, over the session's limit of "
            f"{self.session.max_event_bytes} bytes per event; it was dropped"
        )
        return carried_answer(text, "OutputTooLargeError", OUTPUT_TOO_LARGE)

    async def _make_durable(self, index: int, settled: _Settled) -> _Settled:
        """An earlier call is still running: record this result as ``tool/outcome`` now."""
        call_seq = self._call_seqs[index]
        assert call_seq is not None
        message = Message.tool_result(
            self._calls[index].id, settled.content, is_error=settled.error is not None
        )
        event = self.session.append(
            "tool/outcome",
            ToolOutcome(
                turn=self.turn,
                step=self.step,
                call_id=self._calls[index].id,
                result=message,
                error=settled.error,
                context=settled.context,
            ),
            sources=(call_seq,),
        )
        try:
            await self.session.flush()
        except EventLogError as exc:
            # Committed; the step-end checkpoint retries the write and reports a failure.
            logger.warning("agent: could not flush tool/outcome at seq %d: %s", event.seq, exc)
        return replace(settled, outcome=event)

    def _log_call(self, index: int) -> None:
        call = self._calls[index]
        event = self.session.append(
            "tool/call",
            ToolCall(
                turn=self.turn,
                step=self.step,
                call_id=call.id,
                name=call.name,
                arguments=call.arguments,
            ),
            sources=self._source,
        )
        self._call_seqs[index] = event.seq

    def _fill(self, index: int, settled: _Settled) -> None:
        """Place a result in its slot and commit every result now due, in the model's order."""
        self._slots[index] = settled
        while self._committed < len(self._slots):
            ready = self._slots[self._committed]
            if ready is None:
                return
            self._commit(self._committed, ready)
            self._committed += 1

    def _commit(self, index: int, settled: _Settled) -> None:
        call_seq = self._call_seqs[index]
        if settled.sources is not None:  # answered without running: cites what decided it
            sources: tuple[int, ...] = settled.sources
            message = Message.tool_result(self._calls[index].id, settled.content, is_error=True)
        elif settled.outcome is None:
            assert call_seq is not None
            sources = (call_seq,)
            message = Message.tool_result(
                self._calls[index].id, settled.content, is_error=settled.error is not None
            )
        else:  # answer with the message the outcome already recorded
            assert call_seq is not None
            sources = (call_seq, settled.outcome.seq)
            message = settled.outcome.data.result
        event = self.session.append(
            "tool/result",
            ToolResult(
                turn=self.turn,
                step=self.step,
                message=message,
                error=settled.error,
                context=settled.context,
            ),
            surface=APPEND,
            sources=sources,
        )
        self._result_seqs.append(event.seq)

    async def _wait(self, ready: Callable[[], bool], *, or_cancel: bool) -> None:
        while not ready() and not (or_cancel and self.cancel.is_set()):
            self._changed = anyio.Event()
            await self._changed.wait()

    async def _watch_cancel(self, scope: anyio.CancelScope) -> None:
        with scope:
            await self.cancel.wait()
            self._changed.set()


def _settled_from(output: ToolOutput) -> _Settled:
    if output.is_error:
        return _Settled(
            content=output.content,
            error=ToolError(name="ToolError", code=output.error_code or TOOL_ERROR),
            context=_context_of(output),
        )
    return _Settled(
        content=output.content, concludes=output.concludes_turn, context=_context_of(output)
    )


def _context_of(output: ToolOutput) -> Message | None:
    # as_output made a text context a Message already; the check keeps mypy and a
    # hand-built output honest.
    return output.context if isinstance(output.context, Message) else None
