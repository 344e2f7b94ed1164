"""How a step's failed model attempts are retried: the official SDKs' policy by default.

The ``openai`` and ``anthropic`` SDKs retry twice, after ``0.5 s * 2 ** n`` capped at 8 s, each
delay shortened by up to a quarter at random (jitter, so clients that failed together do not
come back together), and wait exactly what a server's ``Retry-After`` asks when it asks for
something reasonable. The provider adapters turn the SDKs' own retries off so that every
attempt is the agent's and is logged; :class:`RetryPolicy` is that policy, in the agent.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from ._checks import check_callable, check_count, refuse

__all__ = ("RetryPolicy",)

_WHERE = "RetryPolicy"


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """When a failed (or empty) model attempt is tried again within its step.

    Retry ``n`` (1 for the first) waits ``min(initial_delay * 2 ** (n - 1), max_delay)``, less a
    random fraction of up to ``jitter`` of it; or exactly the ``retry_after`` the failure carries
    (a server's ``Retry-After``), when that is above 0 and at most ``max_retry_after``. A longer
    ``Retry-After`` is not waited for: the step gives up (the turn ends ``error``), as the
    ``openai`` SDK does. Failures that are not retryable (a 4xx refusal) are never retried.

    :param max_retries: retries after the first attempt (0: a failure ends the turn at once).
    :param initial_delay: seconds before the first retry, before jitter.
    :param max_delay: the longest back-off, before jitter.
    :param jitter: the largest fraction of a back-off removed at random (0 to 1).
    :param max_retry_after: the longest ``Retry-After`` honoured, in seconds (may be ``inf``).
    :param random: the jitter's source of numbers in ``[0, 1)``; fix it for reproducible delays.
    :raises AgentConfigError: an argument of the wrong type or out of range.
    """

    max_retries: int = 2
    initial_delay: float = 0.5
    max_delay: float = 8.0
    jitter: float = 0.25
    max_retry_after: float = 120.0
    random: Callable[[], float] = field(default=random.random, compare=False, repr=False)

    def __post_init__(self) -> None:
        check_count(_WHERE, "max_retries", self.max_retries, 0)
        _check_number("initial_delay", self.initial_delay, math.inf)
        _check_number("max_delay", self.max_delay, math.inf)
        _check_number("jitter", self.jitter, 1.0)
        if not (_number(self.max_retry_after) and self.max_retry_after >= 0):  # NaN: refused
            raise refuse(_WHERE, "max_retry_after", "seconds >= 0 (or inf)", self.max_retry_after)
        check_callable(_WHERE, "random", self.random, "a function returning a float in [0, 1)")

    def delay(self, retry: int, retry_after: float | None = None) -> float | None:
        """Seconds to wait before retry number ``retry`` (1 for the first), or ``None`` when the
        policy gives up (retries spent, or a ``retry_after`` longer than ``max_retry_after``).

        :raises AgentConfigError: ``retry`` is not an integer >= 1.
        """
        check_count("RetryPolicy.delay", "retry", retry, 1)
        if retry > self.max_retries:
            return None
        if retry_after is not None and retry_after > 0:  # NaN compares false: backed off
            return retry_after if retry_after <= self.max_retry_after else None
        # The exponent is capped so that a policy of thousands of retries cannot overflow.
        backoff = min(self.initial_delay * 2.0 ** min(retry - 1, 1000), self.max_delay)
        drawn = min(max(float(self.random()), 0.0), 1.0)  # a stray source cannot go negative
        return backoff * (1.0 - self.jitter * drawn)


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_number(name: str, value: object, high: float) -> None:
    """A real number in ``[0, high]`` (finite unless ``high`` is infinite and it is not NaN)."""
    if not _number(value) or not 0 <= value <= high or math.isinf(value):  # type: ignore[operator, arg-type]
        bound = (
            "a finite number of seconds >= 0"
            if math.isinf(high)
            else f"a number from 0 to {high:g}"
        )
        raise refuse(_WHERE, name, bound, value)
