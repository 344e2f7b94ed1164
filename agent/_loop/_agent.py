"""The agent: turns and steps over a durable session (docs/architecture.md).

A turn: ``turn/start``, then steps until the model stops asking for tools. A step: claim the
inbox (``agent/inbox/spliced``), ``step/start``, the claimed ``user/message`` s, the request
(``request/header`` when it changed; it carries the bytes of the attachments it references), a
flush (so the request is never sent for input that is not durable), the model stream, the
settled ``assistant/message`` (a failed or empty attempt is a log-only ``assistant/attempt``,
retried as the :class:`RetryPolicy` says), the tools, ``step/end`` and a flush.

Turns end ``completed``, ``aborted`` (cancel), ``blocked`` (``max_steps`` reached, or the
``before_step`` hook blocked a step), ``error`` (the model kept failing or replying empty, a hook
failed, or the loop failed) or ``max-tokens`` (sticky for the turn). A concluding tool ends the
turn unless steering arrived meanwhile; a step with no calls to run ends it unless steering
arrived or the ``should_continue`` hook asks for another step (:mod:`agent._loop._hooks`).

A step whose calls need a person's decision (``@tool(approval=...)``) asks for them durably and
waits: the turn stays open, ``run_until_idle()`` returns its outcome ``awaiting approval``, and
once :meth:`Agent.approve` / :meth:`Agent.deny` (or another process) decided every call, the next
``run_until_idle()`` goes on with that step (docs/approvals.md).

Cancellation of a running turn is a request, not a task cancel: the stream is abandoned at
once, started tools are drained, unstarted ones are answered ``ABORTED_BEFORE_DISPATCH``, and
the turn is closed normally, so a cancelled session never needs repair.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import anyio
from anyio.abc import TaskStatus

from eventlog import (
    Event,
    Message,
    Session,
    StepEnd,
    Store,
    TurnEnd,
    TurnEndReason,
    TurnStart,
)
from projections import inbox, request_header, timeline
from projections.inbox import cancel_all
from recovery import RepairReport, repair, scan

from ._approvals import Approvals, continue_calls, declared_tools, run_calls
from ._attachments import AttachmentCache
from ._attempts import StepAttempts
from ._boundaries import ask_continue, close_after_failure, may_continue, open_step, turn_ending
from ._compaction import AutoCompaction, CompactionResult, Summarizer, compact, compact_auto
from ._errors import AgentBusyError, OpenTurnError
from ._execution import ExecutionReport, ToolExecutor
from ._hooks import BeforeStep, ShouldContinue, StepSettings
from ._inbox import Admission, prompt, submit
from ._interrupt import Interrupter
from ._model import Chunk, Model
from ._options import agent_options, check_session
from ._outcomes import StepKind, StepResult, TurnOutcome, TurnOutcomeReason
from ._request import model_request
from ._retry import RetryPolicy
from ._tools import Body, Tool, Toolbox

__all__ = ("Agent", "TurnOutcome", "TurnOutcomeReason", "StepKind")

logger = logging.getLogger("agent")


class Agent(Approvals):
    """Runs turns on ``session`` with ``model`` and ``tools``.

    :param tools: :class:`Tool` s, or plain functions, each made a tool as :func:`tool` makes
        one (its name, docstring and typed parameters; refused if they cannot be described).
    :param system: the system prompt.
    :param params: model parameters (temperature, max tokens, ...), recorded in
        ``request/header``.
    :param model_name: the model name requested (``ModelRequest.model``) and recorded in
        ``request/header``; by default ``model.name``.
    :param max_parallel: at most this many concurrency-safe tool calls at once.
    :param retry: how failed and empty model attempts are retried within a step before the
        turn ends ``error`` (by default the official SDKs' policy: 2 retries, exponential
        back-off from 0.5 s with jitter, the server's ``Retry-After`` honoured); a
        :class:`ModelError` with ``retryable`` false is not retried.
    :param max_steps: steps per turn before the turn ends ``blocked``.
    :param compaction: automatic compaction before each request, if given.
    :param store: the store ``session`` belongs to (:meth:`resume` passes its own). With it,
        each request carries the bytes of the attachments its messages reference (read once,
        kept while still referenced), and the images and files a tool returns inline are
        stored as attachments before its result is committed. Without it, requests carry no
        attachment bytes and tool results keep theirs inline.
    :param before_step: a hook (sync or async) asked before each step takes its input, given a
        :class:`StepContext`: it returns ``None``, a :class:`StepPlan` (this step's model,
        prompt, parameters or tools) or a :class:`Block` (the turn ends ``blocked``).
    :param should_continue: a hook (sync or async) asked when a step ends with no calls to
        run and no waking input queued: ``True`` runs another step.
    :raises AgentConfigError: an argument of the wrong type or out of range (naming it), or
        two tools share a name.
    """

    def __init__(
        self,
        session: Session,
        model: Model,
        tools: Iterable[Tool | Body] | None = (),
        *,
        system: str = "",
        params: Mapping[str, Any] | None = None,
        model_name: str | None = None,
        max_parallel: int = 10,
        retry: RetryPolicy | None = None,
        max_steps: int = 64,
        compaction: AutoCompaction | None = None,
        store: Store | None = None,
        before_step: BeforeStep | None = None,
        should_continue: ShouldContinue | None = None,
    ) -> None:
        self.session = check_session(session)
        options = agent_options(
            model,
            tools,
            system=system,
            params=params,
            model_name=model_name,
            max_parallel=max_parallel,
            retry=retry,
            max_steps=max_steps,
            compaction=compaction,
            store=store,
            before_step=before_step,
            should_continue=should_continue,
        )
        self.model = model
        self.toolbox = options.toolbox
        self.system = options.system
        self.params = options.params
        self.model_name = options.model_name
        self.max_parallel = options.max_parallel
        self.retry = options.retry
        self.max_steps = options.max_steps
        self.compaction = options.compaction
        self._hooks = options.hooks
        #: What :meth:`resume` repaired, if this agent was resumed.
        self.repair_report: RepairReport | None = None
        self._attachments = AttachmentCache(session, options.store)
        self._live: list[Callable[[Chunk], None]] = []
        self._running = False
        self._interrupter: Interrupter | None = None
        # The tools the latest step's request declared (a before_step plan may have set them),
        # which its calls run against, also when the step goes on after decisions.
        self._step_tools: dict[tuple[int, int], Toolbox] = {}

    @classmethod
    async def resume(
        cls,
        store: Store,
        session_id: str,
        model: Model,
        tools: Iterable[Tool | Body] | None = (),
        *,
        wait: float = 0.0,
        **options: Any,
    ) -> Agent:
        """Open ``session_id``, repair what a crash left open, and return its agent.

        A step that asked for decisions is not repaired: it waits (or, every decision made,
        :meth:`run_until_idle` goes on with it), and the report lists what :func:`scan` saw.

        Turn numbering continues after the last turn; a pending inbox stays pending. The
        ``system``, ``model_name`` and ``params`` in force (the last ``request/header`` values)
        are kept unless given in ``options``; a different value given is used, and the next
        ``request/header`` records the change.

        :param wait: seconds to wait for another live writer to let the session go (passed to
            :meth:`Store.open`); a crashed writer's lease is taken over at once regardless.
        :raises SessionNotFoundError: no such session.
        :raises SessionBusyError: another live writer holds the session (still, after ``wait``).
        :raises AgentConfigError: an argument of the wrong type or out of range; raised before
            the session is opened, so nothing is repaired or held.
        """
        # Refuse bad arguments before touching the session; the tools are taken once (they
        # may come from a generator).
        toolbox = agent_options(model, tools, **{"store": store, **options}).toolbox
        session = await store.open(session_id, wait=wait)
        try:
            if timeline(session).approvals:
                report = RepairReport(diagnosis=scan(session))
            else:
                report = await repair(session)
            header = request_header(session)
            kept = {"system": header.system, "model_name": header.model, "params": header.params}
            for name, value in kept.items():
                if value is not None:
                    options.setdefault(name, value)
            options.setdefault("store", store)
            agent = cls(session, model, toolbox, **options)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await session.aclose()
            raise
        agent.repair_report = report
        return agent

    def __repr__(self) -> str:
        state = "running" if self._running else "idle"
        return f"<Agent session={self.session.id!r} {state} model={self.model.name!r}>"

    # -- input ---------------------------------------------------------------------------------

    def followup(self, message: str | Message) -> Admission:
        """Queue ``message`` to open its own turn (next-turn)."""
        return submit(self.session, "next-turn", message)

    def steer(self, message: str | Message) -> Admission:
        """Queue ``message`` for the next step of the running turn (or a new turn if idle)."""
        return submit(self.session, "next-step", message)

    def inject(self, message: str | Message) -> Admission:
        """Queue ``message`` for the next step without starting one (it waits for a wake)."""
        return submit(self.session, "next-step", message, wake=False)

    async def prompt(self, text: str | Message, *, request_id: str) -> Admission:
        """Queue a user prompt once per ``request_id`` (durable on return; see
        :func:`agent.prompt`)."""
        return await prompt(self.session, text, request_id=request_id)

    def on_chunk(self, callback: Callable[[Chunk], None]) -> Callable[[], None]:
        """Show live stream chunks to ``callback`` (never persisted); returns the unsubscribe.

        A callback that raises is logged and ignored.
        """
        self._live.append(callback)

        def unsubscribe() -> None:
            if callback in self._live:
                self._live.remove(callback)

        return unsubscribe

    # -- control -------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """True while a turn runs."""
        return self._running

    def cancel(self, *, clear_inbox: bool = False) -> None:
        """Abort the running turn: stop the stream, start no new tool, drain started tools.

        :param clear_inbox: also withdraw every pending input (``outcome: canceled``).
        """
        if self._interrupter is not None:
            self._interrupter.cancel()
        if clear_inbox:
            for payload in cancel_all(inbox(self.session)):
                self.session.append("agent/inbox/spliced", payload)

    async def compact(self, start: int, end: int, summarizer: Summarizer) -> CompactionResult:
        """Compact the surface span ``[start, end]`` now (see :func:`agent.compact`).

        :raises AgentBusyError: a turn is running.
        :raises CompactionError: the compaction was refused or failed (nothing replaced).
        """
        if self._running:
            raise AgentBusyError(
                f"session {self.session.id!r}: cannot compact while a turn is running",
                session_id=self.session.id,
            )
        self._running = True  # no turn may start while the summarizer runs
        try:
            return await compact(self.session, start, end, summarizer)
        finally:
            self._running = False

    async def run_until_idle(self) -> list[TurnOutcome]:
        """Run turns while the inbox has input that wakes the agent.

        Stops after a turn that was cancelled (pending input stays queued), and at a step that
        waits for decisions (outcome ``awaiting approval``); a waiting step whose decisions
        are all made is gone on with first.

        :raises AgentBusyError: a turn is already running.
        :raises OpenTurnError: the session has a turn open (repair it, or use :meth:`resume`).
        """
        outcomes: list[TurnOutcome] = []
        waiting = bool(timeline(self.session).approvals)
        while waiting or inbox(self.session).wakes:
            waiting = False
            outcome = await self.run_turn()
            outcomes.append(outcome)
            if outcome.reason in ("aborted", "awaiting approval"):
                break
        return outcomes

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run turns whenever waking input arrives, until cancelled (start it in a task group:
        ``await task_group.start(agent.serve)``).

        Any submission wakes it, whoever made it (:meth:`followup`, :func:`agent.prompt` from a
        request handler, ...): it watches the session's ``agent/inbox/spliced`` events.
        """
        wake = anyio.Event()

        def watch(event: Event) -> None:
            if event.type == "tool/approval" or (
                event.type == "agent/inbox/spliced" and any(i.wake for i in event.data.inserted)
            ):
                wake.set()

        unsubscribe = self.session.subscribe(watch)
        task_status.started()
        try:
            while True:
                wake = anyio.Event()
                view = timeline(self.session)
                if view.awaiting_approval or not (view.approvals or inbox(self.session).wakes):
                    await wake.wait()
                await self.run_until_idle()
        finally:
            unsubscribe()

    async def run_turn(self) -> TurnOutcome:
        """Run one turn with what the inbox holds (a turn with an empty inbox is allowed), or
        go on with the open turn whose step waited for decisions: outcome ``awaiting
        approval`` (nothing done) while one is missing.

        If the loop itself fails (e.g. ``StoreWriteError`` at a checkpoint), the turn is closed
        ``error`` when nothing is left unanswered, and the error propagates. If the task
        running the turn is cancelled from outside, the turn is left open like a crash would
        leave it: repair it (or :meth:`resume`) before the next turn.

        :raises AgentBusyError: a turn is already running.
        :raises OpenTurnError: the session has a turn open (and no step of it asked for
            decisions).
        """
        if self._running:
            raise AgentBusyError(
                f"session {self.session.id!r}: a turn is already running",
                session_id=self.session.id,
            )
        view = timeline(self.session)
        if view.turn is not None and view.step is not None and view.approvals:
            if view.awaiting_approval:
                return TurnOutcome(view.turn.number, "awaiting approval", view.step.number)
            return await self._guarded(view.turn.number, view.step.number)
        if view.turn is not None:
            raise OpenTurnError(
                f"session {self.session.id!r}: turn {view.turn.number} (seq {view.turn.seq}) is "
                "still open",
                session_id=self.session.id,
                seq=view.turn.seq,
                hint="a crash left it open: use Agent.resume, or recovery.repair first",
            )
        return await self._guarded(view.next_turn, None)

    async def _guarded(self, turn: int, waited: int | None) -> TurnOutcome:
        self._running = True
        self._interrupter = Interrupter()
        try:
            return await self._turn(turn, waited)
        finally:
            self._running = False
            self._interrupter = None

    # -- the turn and its steps ----------------------------------------------------------------

    async def _turn(self, turn: int, waited: int | None = None) -> TurnOutcome:
        """Run turn ``turn``, or go on with it from step ``waited``, whose calls waited for
        decisions (``max-tokens`` is then sticky from that step on)."""
        session = self.session
        if waited is None:
            session.append("turn/start", TurnStart(turn=turn))
        step, sticky_max_tokens = waited or 0, False
        reason: TurnEndReason = "completed"
        try:
            while True:
                if waited is not None:
                    result, waited = await self._continue_step(turn, step), None
                else:
                    if self._cancelled:
                        reason = "aborted"
                        break
                    if step == self.max_steps:
                        reason = "blocked"
                        break
                    step += 1
                    result = await self._step(turn, step)
                if result.kind == "awaiting approval":
                    if not timeline(session).awaiting_approval:
                        waited = step  # decided while the step ran its other calls: go on
                        continue
                    await session.flush()  # checkpoint: what ran meanwhile is durable
                    return TurnOutcome(turn=turn, reason="awaiting approval", steps=step)
                sticky_max_tokens |= result.kind == "max-tokens"
                if may_continue(self.session, result, self._hooks, self._cancelled):
                    asked = await ask_continue(
                        session, turn, step, self._settings(), self._hooks, result.reply_seq
                    )
                    result = result if asked == "stop" else StepResult(asked)
                session.append("step/end", StepEnd(turn=turn, step=step))
                ending = turn_ending(self.session, result, self._cancelled)
                if ending is not None:
                    reason = ending
                    break
                await session.flush()  # checkpoint: step end
        except Exception:
            close_after_failure(self.session, turn, step)
            raise
        if reason == "completed" and sticky_max_tokens:
            reason = "max-tokens"
        session.append("turn/end", TurnEnd(turn=turn, reason=reason))
        await session.flush()  # checkpoint: step end and turn end in one write
        return TurnOutcome(turn=turn, reason=reason, steps=step)

    def _settings(self) -> StepSettings:
        """The agent's settings as they stand (what a step without a plan is made with)."""
        params = MappingProxyType(dict(self.params))
        return StepSettings(self.model, self.model_name, self.system, params, self.toolbox)

    async def _step(self, turn: int, step: int) -> StepResult:
        session = self.session
        opened = await open_step(session, turn, step, self._settings(), self._hooks)
        if opened.ending is not None:
            return StepResult(opened.ending)
        # Taken once: the calls run against the tools this request declares, whatever
        # happens to the agent's tools meanwhile.
        plan = opened.settings
        if self.compaction is not None:
            await compact_auto(session, self.compaction)
        request = model_request(
            session, plan.system, plan.tools.specs(), plan.model_name, plan.params
        )
        attachments = await self._attachments.for_request(request.messages)
        if attachments:
            request = replace(request, attachments=attachments)
        assert self._interrupter is not None
        attempts = StepAttempts(
            session, plan.model, self._interrupter, self._show, self.retry, turn, step
        )
        settled = await attempts.settle(request)
        if settled.kind != "reply":
            return StepResult(settled.kind, reply_seq=settled.seq)
        if not settled.tool_calls:
            return StepResult("stop", reply_seq=settled.seq)
        self._step_tools = {(turn, step): plan.tools}
        report = await run_calls(self._executor(turn, step), settled.tool_calls, settled.seq)
        return self._after_tools(report)

    async def _continue_step(self, turn: int, step: int) -> StepResult:
        """Go on with step ``step``, whose calls waited for decisions (docs/approvals.md),
        without asking ``before_step`` again: its decision is in the log."""
        return self._after_tools(await continue_calls(self._executor(turn, step)))

    def _executor(self, turn: int, step: int) -> ToolExecutor:
        """The executor of the step's calls, against the tools its request declared: as this
        agent ran it, or (a step resumed in another process) the agent's tools of the names
        the request declared."""
        assert self._interrupter is not None
        tools = self._step_tools.get((turn, step))
        return ToolExecutor(
            self.session,
            declared_tools(self.session, self.toolbox) if tools is None else tools,
            turn=turn,
            step=step,
            cancel=self._interrupter.event,
            max_parallel=self.max_parallel,
            attachments=self._attachments,
        )

    def _after_tools(self, report: ExecutionReport | None) -> StepResult:
        if report is None:  # an approval policy raised: every call answered APPROVAL_FAILED
            return StepResult("error")
        if report.aborted or self._cancelled:
            return StepResult("aborted")
        if report.held:
            return StepResult("awaiting approval")
        return StepResult("tools", concluded=report.concluded)

    def _show(self, chunk: Chunk) -> None:
        for callback in tuple(self._live):
            try:
                callback(chunk)
            except Exception:
                logger.exception("agent: live observer %r failed", callback)

    @property
    def _cancelled(self) -> bool:
        return self._interrupter is not None and self._interrupter.cancelled
