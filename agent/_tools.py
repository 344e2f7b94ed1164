"""Tools: what the model may call.

A :class:`Tool` has a name, a description, JSON-schema parameters, a decoder for the model's raw
argument string, a concurrency predicate and an async body. :func:`tool` builds one from a typed
function or from a function taking one msgspec ``Struct``; the schema is derived with msgspec so
it always matches what the decoder accepts.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, get_type_hints, overload, runtime_checkable

import anyio
import msgspec

from eventlog import FilePart, ImagePart, ResultPart, Session, TextPart, ToolSpec

__all__ = (
    "FunctionTool",
    "Tool",
    "ToolArgumentsError",
    "ToolContext",
    "ToolOutput",
    "Toolbox",
    "tool",
    "Body",
    "Returned",
    "as_output",
    "spec_of",
)


class ToolOutput(msgspec.Struct, frozen=True, kw_only=True):
    """What a tool body returns. ``content`` is a string, or text, image and file parts (an
    image's bytes inline are stored as an attachment before the result is committed, when the
    agent has a store).

    :ivar is_error: the tool ran and reports failure (the model sees an error result).
    :ivar concludes_turn: a successful result that ends the turn (unless steering arrived).
    :ivar error_code: the machine-readable code recorded with an error result.
    """

    content: str | tuple[ResultPart, ...]
    is_error: bool = False
    concludes_turn: bool = False
    error_code: str | None = None


class ToolArgumentsError(ValueError):
    """The model's argument string does not match the tool's parameters."""


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Given to each tool body. ``cancel_requested`` is set when the agent is cancelled: the
    body may stop early (a started call is always waited for, never abandoned)."""

    session: Session
    turn: int
    step: int
    call_id: str
    cancel_requested: anyio.Event = field(compare=False)


@runtime_checkable
class Tool(Protocol):
    """A tool the model may call."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def parameters(self) -> Mapping[str, Any]:
        """The JSON schema of the arguments object."""
        ...

    def decode(self, arguments: str) -> Any:
        """Parse the model's raw argument JSON.

        :raises ToolArgumentsError: the string is not JSON or does not match the parameters.
        """
        ...

    def is_concurrency_safe(self, args: Any) -> bool:
        """True when this call may run alongside other safe calls (default: false)."""
        ...

    async def call(self, args: Any, context: ToolContext) -> ToolOutput:
        """Run the body."""
        ...


#: What a tool body may return: an output, a string, or one or more result parts.
Returned = ToolOutput | str | ResultPart | Sequence[ResultPart]
Body = Callable[..., Awaitable[Returned] | Returned]


def as_output(result: object) -> ToolOutput:
    """``result`` as a :class:`ToolOutput`: parts (one, or a sequence of text, image and file
    parts) become its content as a tuple; anything else but an output becomes its ``str``."""
    if isinstance(result, ToolOutput):
        return result
    if isinstance(result, TextPart | ImagePart | FilePart):
        return ToolOutput(content=(result,))
    if (
        isinstance(result, Sequence)
        and not isinstance(result, str)
        and result
        and all(isinstance(p, TextPart | ImagePart | FilePart) for p in result)
    ):
        return ToolOutput(content=tuple(result))
    return ToolOutput(content=str(result))


class FunctionTool:
    """A :class:`Tool` over a Python function (see :func:`tool`)."""

    def __init__(
        self,
        fn: Body,
        *,
        name: str | None = None,
        description: str | None = None,
        safe: bool | Callable[[Any], bool] = False,
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        self.description = description if description is not None else inspect.getdoc(fn) or ""
        self._safe = safe
        self.params_type, self._spread, self._wants_context = _params_of(fn)
        self._decoder = msgspec.json.Decoder(self.params_type)
        self.parameters: dict[str, Any] = _schema(self.params_type)

    def decode(self, arguments: str) -> Any:
        try:
            return self._decoder.decode(arguments.strip() or "{}")
        except msgspec.DecodeError as exc:
            raise ToolArgumentsError(f"invalid arguments for tool {self.name!r}: {exc}") from exc

    def is_concurrency_safe(self, args: Any) -> bool:
        return self._safe(args) if callable(self._safe) else self._safe

    async def call(self, args: Any, context: ToolContext) -> ToolOutput:
        kwargs: dict[str, Any] = {}
        if self._wants_context:
            kwargs["context"] = context
        if self._spread:
            kwargs.update(msgspec.structs.asdict(args))
            result = self.fn(**kwargs)
        else:
            result = self.fn(args, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        return as_output(result)

    @property
    def spec(self) -> ToolSpec:
        """The tool as offered to the model."""
        return spec_of(self)

    def __repr__(self) -> str:
        return f"<FunctionTool {self.name!r}>"


@overload
def tool(
    fn: Body,
    *,
    name: str | None = None,
    description: str | None = None,
    safe: bool | Callable[[Any], bool] = False,
) -> FunctionTool: ...
@overload
def tool(
    fn: None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    safe: bool | Callable[[Any], bool] = False,
) -> Callable[[Body], FunctionTool]: ...
def tool(
    fn: Body | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    safe: bool | Callable[[Any], bool] = False,
) -> FunctionTool | Callable[[Body], FunctionTool]:
    """Make a :class:`FunctionTool`; usable as ``@tool`` or ``@tool(safe=True)``.

    The function either takes one parameter annotated with a msgspec ``Struct`` (the arguments
    object), or typed keyword parameters (a schema is derived from the annotations and
    defaults). A parameter named ``context`` receives the :class:`ToolContext`. The body may
    be sync or async and returns a :class:`ToolOutput`, a string, or result parts (a
    :class:`~eventlog.TextPart`, :class:`~eventlog.ImagePart` or :class:`~eventlog.FilePart`,
    or a sequence of them), which the model receives as a result with that content.

    :param safe: concurrency safety: a constant or a predicate over the decoded arguments.
    """

    def make(f: Body) -> FunctionTool:
        return FunctionTool(f, name=name, description=description, safe=safe)

    return make if fn is None else make(fn)


def _params_of(fn: Body) -> tuple[type[msgspec.Struct], bool, bool]:
    """The arguments Struct, whether to spread it into keywords, whether to pass the context."""
    hints = get_type_hints(fn)
    params = [p for p in inspect.signature(fn).parameters.values() if p.name != "context"]
    wants_context = "context" in inspect.signature(fn).parameters
    if len(params) == 1:
        annotation = hints.get(params[0].name)
        if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
            return annotation, False, wants_context
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for p in params:
        annotation = hints.get(p.name, Any)
        if p.default is inspect.Parameter.empty:
            fields.append((p.name, annotation))
        else:
            fields.append((p.name, annotation, p.default))
    struct_name = "".join(part.title() for part in getattr(fn, "__name__", "tool").split("_"))
    struct = msgspec.defstruct(f"{struct_name}Arguments", fields, kw_only=True)
    return struct, True, wants_context


def _schema(params_type: type[msgspec.Struct]) -> dict[str, Any]:
    """The JSON schema of ``params_type``, inline, with nested types under ``$defs``."""
    (_ref,), components = msgspec.json.schema_components(
        [params_type], ref_template="#/$defs/{name}"
    )
    top = dict(components.pop(params_type.__name__))
    top.pop("title", None)
    if components:
        top["$defs"] = components
    return top


def spec_of(tool: Tool) -> ToolSpec:
    """The :class:`ToolSpec` offered to the model for ``tool``."""
    return ToolSpec(name=tool.name, description=tool.description, parameters=dict(tool.parameters))


class Toolbox:
    """The tools an agent offers, by name, in a stable order.

    :raises ValueError: (at construction) two tools share a name.
    """

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools:
            if t.name in self._tools:
                raise ValueError(f"two tools are named {t.name!r}")
            self._tools[t.name] = t

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or ``None``."""
        return self._tools.get(name)

    def specs(self) -> tuple[ToolSpec, ...]:
        """Every tool as offered to the model."""
        return tuple(spec_of(t) for t in self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Any:
        return iter(self._tools.values())
