"""A model that replays scripted responses: for tests, the demo and offline development.

Each request takes the next entry of the script. An entry is a :class:`Response` or a function of
the request that returns one (so a script can react to what the model was shown, e.g. a
recovered ``TOOL_OUTCOME_UNKNOWN`` result). A response is cut into small chunks the way a
provider streams; it can wait before or between chunks, fail after some chunks, or hold at a
chunk until a test releases it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

import anyio

from eventlog import ToolCallPart, Usage

from ._checks import check_str, refuse
from ._model import (
    Chunk,
    Finish,
    FinishKind,
    ModelError,
    ModelRequest,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
)

__all__ = ("Response", "ScriptEntry", "ScriptedModel")


@dataclass(frozen=True)
class Response:
    """One scripted reply.

    :ivar tool_calls: ``ToolCallPart`` s, or ``(name, arguments_json)`` pairs that get ids
        ``call-<request>-<n>``.
    :ivar finish: the finish kind; by default ``tool-calls`` when there are calls, else ``stop``.
    :ivar chunk_size: characters per text, reasoning or argument fragment.
    :ivar delay: seconds to wait before the first chunk.
    :ivar chunk_delay: seconds to wait before each later chunk.
    :ivar fail_after: raise :class:`ModelError` after this many chunks (no finish).
    :ivar hold_after: after this many chunks, set ``reached`` and wait for ``release`` (forever
        when ``release`` is ``None``): lets a test cancel at an exact point of the stream.
    """

    text: str = ""
    reasoning: str = ""
    tool_calls: Sequence[ToolCallPart | tuple[str, str]] = ()
    finish: FinishKind | None = None
    usage: Usage | None = None
    error: str = "scripted model failure"
    chunk_size: int = 16
    delay: float = 0.0
    chunk_delay: float = 0.0
    fail_after: int | None = None
    hold_after: int | None = None
    reached: anyio.Event | None = None
    release: anyio.Event | None = None

    def chunks(self, request_number: int) -> list[Chunk]:
        """The chunks of this response, finish included."""
        out: list[Chunk] = []
        size = max(1, self.chunk_size)
        out += [ReasoningDelta(text=p) for p in _pieces(self.reasoning, size)]
        out += [TextDelta(text=p) for p in _pieces(self.text, size)]
        for index, call in enumerate(self.tool_calls):
            if not isinstance(call, ToolCallPart):
                name, arguments = call
                call = ToolCallPart(
                    id=f"call-{request_number}-{index}", name=name, arguments=arguments
                )
            fragments = _pieces(call.arguments, size) or [""]
            out.append(
                ToolCallDelta(index=index, id=call.id, name=call.name, arguments=fragments[0])
            )
            out += [ToolCallDelta(index=index, arguments=f) for f in fragments[1:]]
        kind = self.finish or ("tool-calls" if self.tool_calls else "stop")
        error = self.error if kind == "error" else None
        out.append(Finish(kind=kind, usage=self.usage, error=error))
        return out


ScriptEntry = Response | Callable[[ModelRequest], Response]


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


class ScriptedModel:
    """Replays ``script``: one entry per request, in order.

    :param script: the entries, or one function called for every request.
    :ivar requests: every request received, in order (what the model was shown).
    :raises ModelError: (from ``stream``) when the script is exhausted.
    :raises AgentConfigError: ``script`` is not a sequence of responses (or functions returning
        one) nor one function, or ``name`` is not a string.
    """

    def __init__(
        self,
        script: Sequence[ScriptEntry] | Callable[[ModelRequest], Response],
        *,
        name: str = "scripted",
    ) -> None:
        where = "ScriptedModel"
        if isinstance(script, str | bytes) or not (
            callable(script) or isinstance(script, Sequence)
        ):
            raise refuse(where, "script", "a sequence of responses, or a function", script)
        if not callable(script):
            for n, entry in enumerate(script):
                if not isinstance(entry, Response) and not callable(entry):
                    expected = "a Response, or a function of the request returning one"
                    raise refuse(where, f"script[{n}]", expected, entry)
        self._script = script
        self._name = check_str(where, "name", name)
        self.requests: list[ModelRequest] = []

    @property
    def name(self) -> str:
        return self._name

    def _next(self, request: ModelRequest) -> Response:
        number = len(self.requests)
        self.requests.append(request)
        if callable(self._script):
            return self._script(request)
        if number >= len(self._script):
            raise ModelError(f"scripted model: no response left for request {number + 1}")
        entry = self._script[number]
        return entry(request) if callable(entry) else entry

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        """Stream the next scripted response."""
        number = len(self.requests) + 1
        response = self._next(request)
        if response.delay:
            await anyio.sleep(response.delay)
        for sent, chunk in enumerate(response.chunks(number)):
            if sent == response.fail_after:
                raise ModelError(response.error)
            if sent == response.hold_after:
                await _hold(response)
            if sent and response.chunk_delay:
                await anyio.sleep(response.chunk_delay)
            yield chunk
            await anyio.lowlevel.checkpoint()


async def _hold(response: Response) -> None:
    if response.reached is not None:
        response.reached.set()
    if response.release is None:
        await anyio.sleep_forever()
    else:
        await response.release.wait()
