"""How turns and steps end: the outcome :meth:`~agent.Agent.run_turn` returns, and what a step
tells the turn loop."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from eventlog import TurnEndReason

__all__ = ("StepKind", "TurnOutcome", "TurnOutcomeReason", "StepResult")

StepKind = Literal[
    "tools", "stop", "max-tokens", "aborted", "error", "blocked", "continue", "awaiting approval"
]
#: How a turn ended (the reason written in ``turn/end``), or ``awaiting approval``: it has not
#: ended, a step waits for decisions.
TurnOutcomeReason = TurnEndReason | Literal["awaiting approval"]


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """How a turn ended: its number, the reason written in ``turn/end``, its step count; or,
    with ``awaiting approval``, that it waits (still open) at step ``steps``."""

    turn: int
    reason: TurnOutcomeReason
    steps: int


@dataclass(frozen=True, slots=True)
class StepResult:
    kind: StepKind
    concluded: bool = False
    reply_seq: int | None = None  # the assistant/message of a step with no calls to run
