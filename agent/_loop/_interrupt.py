"""Cancelling a turn as a request: one flag, and the one wait that may be cut short.

:meth:`Agent.cancel` sets the flag and cancels whatever interruptible wait is in progress (the
model stream, a retry back-off). Everything else (commits, flushes, draining started tools)
runs to completion, so a cancelled turn always ends with a balanced log.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager

import anyio

from eventlog import ValidationError

from ._assembly import Assembler
from ._model import Chunk, Finish, Model, ModelRequest

__all__ = ("Interrupter", "stream_into")

logger = logging.getLogger("agent")


class Interrupter:
    """The cancel flag of one turn and its current interruptible scope."""

    def __init__(self) -> None:
        self.event = anyio.Event()
        self._scope: anyio.CancelScope | None = None

    @property
    def cancelled(self) -> bool:
        return self.event.is_set()

    def cancel(self) -> None:
        """Set the flag and cut short the interruptible wait in progress, if any."""
        self.event.set()
        if self._scope is not None:
            self._scope.cancel()

    @contextmanager
    def interruptible(self) -> Iterator[anyio.CancelScope]:
        """A scope that :meth:`cancel` cancels (at once when the flag is already set)."""
        with anyio.CancelScope() as scope:
            self._scope = scope
            if self.cancelled:
                scope.cancel()
            try:
                yield scope
            finally:
                self._scope = None

    async def pause(self, seconds: float) -> None:
        """Sleep (a retry back-off) unless and until cancelled."""
        with self.interruptible():
            await anyio.sleep(seconds)


async def stream_into(
    model: Model,
    request: ModelRequest,
    assembler: Assembler,
    interrupter: Interrupter,
    show: Callable[[Chunk], None],
) -> tuple[str | None, bool, Exception | None]:
    """Feed the model's stream to ``assembler`` and ``show``: returns ``(error, cancelled,
    raised)``.

    ``error`` describes a failed attempt: the stream raised (``raised`` is the exception, so
    the caller can read a :class:`ModelError`'s retry advice), finished with ``error``, or ended
    without a finish.

    :raises ValidationError: the model refused the request as one it cannot express (no
        attempt was made: nothing to record, nothing to retry).
    """
    with interrupter.interruptible() as scope:
        try:
            async with _closing(model.stream(request)) as chunks:
                async for chunk in chunks:
                    assembler.feed(chunk)
                    show(chunk)
                    if isinstance(chunk, Finish):
                        break
        except ValidationError:
            raise
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}", False, exc
    if scope.cancelled_caught or interrupter.cancelled:
        return None, True, None
    finish = assembler.finish
    if finish is None:
        return "the model stream ended without a finish", False, None
    if finish.kind == "error":
        return finish.error or "the model finished with an error", False, None
    return None, False, None


class _closing:
    """``async with``: close an async generator stream even when abandoned (shielded)."""

    def __init__(self, stream: AsyncIterator[Chunk]) -> None:
        self.stream = stream

    async def __aenter__(self) -> AsyncIterator[Chunk]:
        return self.stream

    async def __aexit__(self, *exc_info: object) -> None:
        aclose = getattr(self.stream, "aclose", None)
        if aclose is not None:
            with anyio.CancelScope(shield=True):
                await aclose()
