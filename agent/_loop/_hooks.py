"""The agent's hooks: ``before_step`` and ``should_continue`` (docs/agent.md#hooks).

Each is optional, sync or async, and given to :class:`~agent.Agent`:

- ``before_step(ctx)`` is asked before a step takes its input: it returns ``None`` (the step
  runs as the agent is set up), a :class:`StepPlan` (a model, model name, system prompt,
  parameters or tool set for this step only) or a :class:`Block` (the turn ends ``blocked``,
  and the input the step would have taken is settled ``refused``).
- ``should_continue(ctx)`` is asked when a step ends with no tool calls to run and no waking
  input queued for a next step: ``True`` runs another step, ``False`` ends the turn.

Every answer is recorded in an ``agent/hook`` event (:class:`~eventlog.HookDecision`) committed
with the events that act on it and flushed before anything follows from it (the model request,
the next step, the end of the turn), so after a crash the log holds the decision and the hook is
never asked it again: the turn it was made in is closed by repair, and nothing in the log is
left for it to decide. A hook that raises, or returns what it may not, is recorded as an
``error`` decision naming the hook, the turn and the step, and the turn ends ``error``; the
agent's own settings are never changed by a hook.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from eventlog import HookDecision, HookName, Message, Session
from projections import MessagesView, messages

from ._checks import check_optional_str, check_params, check_str, clipped, described, refuse
from ._model import Model, check_model
from ._tools import Body, Tool, Toolbox

__all__ = (
    "BeforeStep",
    "Block",
    "Hooks",
    "ShouldContinue",
    "StepContext",
    "StepPlan",
    "StepSettings",
)

logger = logging.getLogger("agent")


@dataclass(frozen=True, slots=True)
class StepSettings:
    """What one step's request is made with: the agent's settings, or a plan's."""

    model: Model
    model_name: str
    system: str
    params: Mapping[str, Any]
    tools: Toolbox


@dataclass(frozen=True, slots=True)
class StepContext:
    """What a hook is shown: the step about to run (``before_step``) or just ended
    (``should_continue``), and the settings the agent would make its request with.

    :ivar session: the agent's session (read it; a hook should not append to it).
    :ivar turn: the turn's number.
    :ivar step: the step's number in the turn.
    :ivar settings: the agent's model, model name, system prompt, parameters (read-only) and
        tools, as they stand.
    :ivar inputs: ``before_step``: the messages the step will take from the inbox (a
        :class:`Block` refuses them); ``should_continue``: empty.
    :ivar reply: ``should_continue``: the model's reply that ended the step, if it left one;
        ``before_step``: ``None``.
    """

    session: Session
    turn: int
    step: int
    settings: StepSettings
    inputs: tuple[Message, ...] = ()
    reply: Message | None = None

    @property
    def messages(self) -> MessagesView:
        """The model-visible history now (the step's inputs are not in it yet)."""
        return messages(self.session)


def _toolbox(tools: object) -> Toolbox | None:
    if tools is None or isinstance(tools, Toolbox):
        return tools
    if isinstance(tools, str | bytes) or not isinstance(tools, Iterable):
        raise refuse("StepPlan", "tools", "an iterable of tools, a Toolbox or None", tools)
    return Toolbox(tools, where="StepPlan")


@dataclass(frozen=True, slots=True)
class StepPlan:
    """``before_step``'s answer that changes this step's request, and only this step's: each
    field given replaces the agent's for the step (``None`` keeps the agent's). The step's
    calls run against the tools its request declared, whatever happens to the agent's tools
    meanwhile.

    :param model: the model to call.
    :param model_name: the model name requested and recorded (by default ``model.name`` when
        ``model`` is given, else the agent's).
    :param system: the system prompt.
    :param params: the model parameters (replacing the agent's, not merged into them).
    :param tools: the tools offered and run (tools or plain functions, as :class:`Agent` takes).
    :raises AgentConfigError: a field of the wrong type (naming it); raised where the plan is
        built, so inside the hook, which then ends the turn ``error``.
    """

    model: Model | None = None
    model_name: str | None = None
    system: str | None = None
    params: Mapping[str, Any] | None = None
    tools: Toolbox | Iterable[Tool | Body] | None = field(default=None)

    def __post_init__(self) -> None:
        if self.model is not None:
            check_model("StepPlan", self.model)
        check_optional_str("StepPlan", "model_name", self.model_name)
        check_optional_str("StepPlan", "system", self.system)
        if self.params is not None:
            object.__setattr__(self, "params", check_params("StepPlan", self.params))
        object.__setattr__(self, "tools", _toolbox(self.tools))

    def changed(self) -> tuple[str, ...]:
        """The names of the fields this plan sets."""
        names = ("model", "model_name", "system", "params", "tools")
        return tuple(name for name in names if getattr(self, name) is not None)

    def applied(self, settings: StepSettings) -> StepSettings:
        """``settings`` with this plan's fields in place of theirs."""
        model = self.model if self.model is not None else settings.model
        default_name = self.model.name if self.model is not None else settings.model_name
        tools = self.tools if isinstance(self.tools, Toolbox) else settings.tools
        return StepSettings(
            model=model,
            model_name=self.model_name if self.model_name is not None else default_name,
            system=self.system if self.system is not None else settings.system,
            params=MappingProxyType(
                dict(self.params if self.params is not None else settings.params)
            ),
            tools=tools,
        )


@dataclass(frozen=True, slots=True)
class Block:
    """``before_step``'s answer that stops the turn: it ends ``blocked``, ``reason`` recorded.

    :raises AgentConfigError: ``reason`` is not a string.
    """

    reason: str

    def __post_init__(self) -> None:
        check_str("Block", "reason", self.reason)


BeforeStep = Callable[[StepContext], "StepPlan | Block | Awaitable[StepPlan | Block | None] | None"]
ShouldContinue = Callable[[StepContext], "bool | Awaitable[bool]"]


@dataclass(frozen=True, slots=True)
class Decided:
    """A hook's answer and the ``agent/hook`` payload that records it."""

    answer: StepPlan | Block | bool | None
    record: HookDecision

    @property
    def failed(self) -> bool:
        return self.record.outcome == "error"


class Hooks:
    """The agent's hooks, asked and their answers checked and turned into records.

    :raises AgentConfigError: (at construction) a hook given that is not callable.
    """

    __slots__ = ("before_step", "should_continue")

    def __init__(self, before_step: object = None, should_continue: object = None) -> None:
        for name, hook in (("before_step", before_step), ("should_continue", should_continue)):
            if hook is not None and not callable(hook):
                raise refuse("Agent", name, "a function (sync or async) or None", hook)
        self.before_step: BeforeStep | None = before_step  # type: ignore[assignment]
        self.should_continue: ShouldContinue | None = should_continue  # type: ignore[assignment]

    async def ask_before_step(self, ctx: StepContext) -> Decided:
        """Ask ``before_step`` (which must be set) and record its answer."""
        assert self.before_step is not None
        answer, error = await _ask("before_step", self.before_step, ctx)
        if error is None and not isinstance(answer, StepPlan | Block | None):
            error = _wrong("before_step", ctx, answer, "a StepPlan, a Block or None")
        if error is not None:
            return _failure("before_step", ctx, error)
        if isinstance(answer, Block):
            return Decided(answer, _record(ctx, "before_step", "block", reason=answer.reason))
        if isinstance(answer, StepPlan):
            return Decided(answer, _record(ctx, "before_step", "plan", changed=answer.changed()))
        return Decided(None, _record(ctx, "before_step", "none"))

    async def ask_should_continue(self, ctx: StepContext) -> Decided:
        """Ask ``should_continue`` (which must be set) and record its answer."""
        assert self.should_continue is not None
        answer, error = await _ask("should_continue", self.should_continue, ctx)
        if error is None and not isinstance(answer, bool):
            error = _wrong("should_continue", ctx, answer, "True or False")
        if error is not None:
            return _failure("should_continue", ctx, error)
        outcome: Literal["continue", "stop"] = "continue" if answer else "stop"
        return Decided(answer is True, _record(ctx, "should_continue", outcome))


async def _ask(
    name: HookName, hook: Callable[[StepContext], Any], ctx: StepContext
) -> tuple[object, str | None]:
    """The hook's answer (awaited if it is awaitable), or what it raised, in words."""
    try:
        answer = hook(ctx)
        if inspect.isawaitable(answer):
            answer = await answer
    except Exception as exc:
        logger.warning("agent: %s of turn %d, step %d raised %r", name, ctx.turn, ctx.step, exc)
        return (
            None,
            f"{name} of turn {ctx.turn}, step {ctx.step} raised {type(exc).__name__}: {exc}",
        )
    return answer, None


def _wrong(name: HookName, ctx: StepContext, answer: object, expected: str) -> str:
    logger.warning(
        "agent: %s of turn %d, step %d returned %s", name, ctx.turn, ctx.step, described(answer)
    )
    return (
        f"{name} of turn {ctx.turn}, step {ctx.step} returned {described(answer)}; "
        f"it must return {expected}"
    )


def _failure(name: HookName, ctx: StepContext, error: str) -> Decided:
    return Decided(None, _record(ctx, name, "error", error=error))


def _record(
    ctx: StepContext,
    hook: HookName,
    outcome: Literal["none", "plan", "block", "continue", "stop", "error"],
    *,
    changed: tuple[str, ...] = (),
    reason: str | None = None,
    error: str | None = None,
) -> HookDecision:
    return HookDecision(
        turn=ctx.turn,
        step=ctx.step,
        hook=hook,
        outcome=outcome,
        changed=changed,
        reason=clipped(reason),
        error=clipped(error),
    )
