"""Tools: what the model may call.

A :class:`Tool` has a name, a description, JSON-schema parameters, a decoder for the model's raw
argument string, a concurrency predicate and an async body. :func:`tool` builds one from a typed
function or from a function taking one msgspec ``Struct``; the schema is derived with msgspec so
it always matches what the decoder accepts. A :class:`Toolbox` (and so an agent) takes plain
functions too, and makes each a tool the same way.

Everything is checked when the tool is built: a name the providers refuse, a parameter that
cannot be passed by name (``*args``, positional-only) or an annotation JSON cannot describe is
an :class:`~agent.AgentConfigError` naming the function, not a failure at the first request.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, overload, runtime_checkable

import anyio
import msgspec

from eventlog import (
    FilePart,
    ImagePart,
    Message,
    MessageSource,
    ResultPart,
    Session,
    TextPart,
    ToolSpec,
    new_id,
)

from ._checks import check_callable, check_optional_str, check_tool_name, described, refuse
from ._errors import AgentConfigError

__all__ = (
    "FunctionTool",
    "Tool",
    "ToolArgumentsError",
    "ToolContext",
    "ToolOutput",
    "Toolbox",
    "tool",
    "Approval",
    "Body",
    "Returned",
    "as_output",
    "as_tool",
    "spec_of",
)


class ToolOutput(msgspec.Struct, frozen=True, kw_only=True):
    """What a tool body returns. ``content`` is a string, or text, image and file parts (an
    image's bytes inline are stored as an attachment before the result is committed, when the
    agent has a store).

    :ivar is_error: the tool ran and reports failure (the model sees an error result).
    :ivar concludes_turn: a successful result that ends the turn (unless steering arrived).
    :ivar error_code: the machine-readable code recorded with an error result.
    :ivar context: what the tool adds to the next step's request: text, or a ``user``
        :class:`~eventlog.Message`. It is recorded with the result (``tool/result``'s
        ``context``) and given to the model after all of the step's results, the contexts in
        the model's order of the calls, whichever call finished first.
    """

    content: str | tuple[ResultPart, ...]
    is_error: bool = False
    concludes_turn: bool = False
    error_code: str | None = None
    context: str | Message | None = None


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
#: Whether a call needs a decision: a constant, or a predicate over the decoded arguments
#: answering ``True``/``False`` or a reason string, sync or async.
Approval = bool | Callable[[Any], "bool | str | Awaitable[bool | str | None] | None"]


def as_output(result: object) -> ToolOutput:
    """``result`` as a :class:`ToolOutput`: parts (one, or a sequence of text, image and file
    parts) become its content as a tuple; anything else but an output becomes its ``str``.

    :raises TypeError: ``result`` is a :class:`ToolOutput` whose fields have the wrong types
        (msgspec does not check them when it is built); the executor answers the call with
        a ``TOOL_FAILED`` error result saying so, as for a body that raised.
    """
    if isinstance(result, ToolOutput):
        return _checked(result)
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


def _checked(output: ToolOutput) -> ToolOutput:
    """``output`` with a content sequence as a tuple, or a ``TypeError`` naming the bad field."""
    content = output.content
    if isinstance(content, Sequence) and not isinstance(content, str | tuple):
        content = tuple(content)
    parts_ok = isinstance(content, tuple) and all(
        isinstance(p, TextPart | ImagePart | FilePart) for p in content
    )
    if not isinstance(content, str) and not parts_ok:
        raise TypeError(
            "the tool returned a ToolOutput whose content must be a string or a sequence of "
            f"text, image and file parts, got {described(output.content)}"
        )
    for name in ("is_error", "concludes_turn"):
        if not isinstance(getattr(output, name), bool):
            raise TypeError(
                f"the tool returned a ToolOutput whose {name} must be True or False, got "
                f"{described(getattr(output, name))}"
            )
    if output.error_code is not None and not isinstance(output.error_code, str):
        raise TypeError(
            "the tool returned a ToolOutput whose error_code must be a string or None, got "
            f"{described(output.error_code)}"
        )
    context = _context_message(output.context)
    if content is output.content and context is output.context:
        return output
    return msgspec.structs.replace(output, content=content, context=context)


def _context_message(context: object) -> Message | None:
    """A tool's ``context`` as the ``user`` message the next request gets (text becomes one,
    marked as written by a tool), or a ``TypeError`` saying what it must be."""
    if context is None or (
        isinstance(context, Message)
        and context.role == "user"
        and all(isinstance(p, TextPart | ImagePart | FilePart) for p in context.content)
    ):
        return context
    if isinstance(context, str):
        return Message(
            id=new_id(),
            role="user",
            content=(TextPart(text=context),),
            source=MessageSource(kind="tool"),
        )
    raise TypeError(
        "the tool returned a ToolOutput whose context must be a string, a user Message of "
        f"text, image and file parts, or None, got {described(context)}"
    )


class FunctionTool:
    """A :class:`Tool` over a Python function (see :func:`tool`).

    :raises AgentConfigError: ``fn`` is not callable, has no name (and none is given) or one the
        providers refuse, or parameters that cannot be described as a JSON object.
    """

    def __init__(
        self,
        fn: Body,
        *,
        name: str | None = None,
        description: str | None = None,
        safe: bool | Callable[[Any], bool] = False,
        approval: Approval = False,
    ) -> None:
        self.fn = check_callable("tool", "fn", fn, "a function (sync or async)")
        if name is None:
            name = getattr(fn, "__name__", None)
            if not isinstance(name, str):
                raise refuse("tool", "name", "given for a callable without a __name__", name)
        self.name = check_tool_name(f"tool {getattr(fn, '__qualname__', None) or fn!r}", name)
        where = f"tool {self.name!r}"
        if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
            raise AgentConfigError(
                f"{where}: a generator function cannot be a tool body (it must return its "
                "result, not yield it)"
            )
        description = check_optional_str(where, "description", description)
        self.description = description if description is not None else inspect.getdoc(fn) or ""
        if not isinstance(safe, bool) and not callable(safe):
            raise refuse(where, "safe", "True, False or a predicate over the arguments", safe)
        self._safe = safe
        if not isinstance(approval, bool) and not callable(approval):
            expected = "True, False or a predicate over the arguments (sync or async)"
            raise refuse(where, "approval", expected, approval)
        self._approval = approval
        self.params_type, self._spread, self._wants_context = _params_of(fn, self.name)
        try:
            self._decoder = msgspec.json.Decoder(self.params_type)
            self.parameters: dict[str, Any] = _schema(self.params_type)
        except (TypeError, ValueError) as exc:  # msgspec: a type or default JSON cannot hold
            raise AgentConfigError(
                f"{where}: its parameters cannot be described as JSON: {exc}"
            ) from exc

    def decode(self, arguments: str) -> Any:
        try:
            return self._decoder.decode(arguments.strip() or "{}")
        except msgspec.DecodeError as exc:
            raise ToolArgumentsError(f"invalid arguments for tool {self.name!r}: {exc}") from exc

    def is_concurrency_safe(self, args: Any) -> bool:
        return self._safe(args) if callable(self._safe) else self._safe

    async def needs_approval(self, args: Any) -> str | None:
        """Why this call needs a person's decision before it runs, or ``None`` when it needs
        none. A predicate may answer ``True``/``False`` or a reason (a non-empty string).

        :raises TypeError: the predicate answered something else.
        :raises Exception: whatever the predicate raised (the agent ends the turn ``error``).
        """
        rule = self._approval
        verdict = rule(args) if callable(rule) else rule
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if verdict is True:
            return f"tool {self.name!r} needs approval"
        if isinstance(verdict, str) and verdict:
            return verdict
        if verdict is False or verdict is None:
            return None
        raise TypeError(
            f"the approval predicate of tool {self.name!r} must return True, False or a reason "
            f"string, got {described(verdict)}"
        )

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
    approval: Approval = False,
) -> FunctionTool: ...
@overload
def tool(
    fn: None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    safe: bool | Callable[[Any], bool] = False,
    approval: Approval = False,
) -> Callable[[Body], FunctionTool]: ...
def tool(
    fn: Body | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    safe: bool | Callable[[Any], bool] = False,
    approval: Approval = False,
) -> FunctionTool | Callable[[Body], FunctionTool]:
    """Make a :class:`FunctionTool`; usable as ``@tool`` or ``@tool(safe=True)``.

    The function either takes one parameter annotated with a msgspec ``Struct`` (the arguments
    object), or typed keyword parameters (a schema is derived from the annotations and
    defaults). A parameter named ``context`` receives the :class:`ToolContext`. The body may
    be sync or async and returns a :class:`ToolOutput`, a string, or result parts (a
    :class:`~eventlog.TextPart`, :class:`~eventlog.ImagePart` or :class:`~eventlog.FilePart`,
    or a sequence of them), which the model receives as a result with that content.

    :param safe: concurrency safety: a constant or a predicate over the decoded arguments.
    :param approval: whether a call needs a person's decision before it runs: a constant, or a
        predicate over the decoded arguments (sync or async) answering ``True``/``False`` or a
        reason string (docs/approvals.md). The tool's schema is the same either way.
    :raises AgentConfigError: see :class:`FunctionTool`.
    """

    def make(f: Body) -> FunctionTool:
        return FunctionTool(f, name=name, description=description, safe=safe, approval=approval)

    return make if fn is None else make(fn)


def _signature(fn: Body, where: str) -> inspect.Signature:
    """``fn``'s signature with its annotations evaluated (``from __future__ import annotations``).

    A partial or a callable object works too; ``Annotated`` constraints are kept, so msgspec
    checks them when decoding and states them in the schema.
    """
    try:
        return inspect.signature(fn, eval_str=True)
    except (TypeError, ValueError) as exc:  # a builtin without a readable signature
        raise AgentConfigError(f"{where}: cannot read the parameters of {fn!r}: {exc}") from exc
    except Exception as exc:  # evaluating an annotation failed (NameError, ...)
        raise AgentConfigError(
            f"{where}: cannot evaluate the annotations of {fn!r}: {type(exc).__name__}: {exc}"
        ) from exc


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_UNNAMED = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def _params_of(fn: Body, name: str) -> tuple[type[msgspec.Struct], bool, bool]:
    """The arguments Struct, whether to spread it into keywords, whether to pass the context."""
    where = f"tool {name!r}"
    signature = _signature(fn, where)
    wants_context = "context" in signature.parameters
    params = [p for p in signature.parameters.values() if p.name != "context"]
    if len(params) == 1 and params[0].kind in _POSITIONAL:
        annotation = params[0].annotation
        if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
            return annotation, False, wants_context
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for p in params:
        if p.kind in _UNNAMED or p.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise AgentConfigError(
                f"{where}: parameter {p.name!r} cannot be passed by name (the model sends a "
                "JSON object of named arguments): use keyword parameters, or one Struct"
            )
        annotation = Any if p.annotation is inspect.Parameter.empty else p.annotation
        if p.default is inspect.Parameter.empty:
            fields.append((p.name, annotation))
        else:
            fields.append((p.name, annotation, p.default))
    struct_name = "".join(part.title() for part in name.replace("-", "_").split("_"))
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


def as_tool(item: object, where: str = "tool") -> Tool:
    """``item`` as a :class:`Tool`: a tool as it is (its name, description and parameters
    checked), a plain function made one as :func:`tool` makes it.

    :raises AgentConfigError: ``item`` is neither, or not a valid tool.
    """
    if isinstance(item, Tool):
        check_tool_name(where, item.name)
        if not isinstance(item.description, str) or not isinstance(item.parameters, Mapping):
            raise refuse(where, "a tool", "a string description and a mapping of parameters", item)
        return item
    if callable(item):
        return FunctionTool(item)
    raise refuse(where, "each tool", "a Tool (see agent.tool) or a plain function", item)


class Toolbox:
    """The tools an agent offers, by name, in a stable order.

    :param tools: :class:`Tool` s, or plain functions (each made a tool by :func:`as_tool`);
        ``None`` is no tools.
    :param where: what the errors name (the agent passes ``"Agent"``).
    :raises AgentConfigError: (at construction) ``tools`` is not an iterable of tools, one of
        them is not a valid tool, or two tools share a name.
    """

    def __init__(self, tools: Iterable[Tool | Body] | None = (), *, where: str = "Toolbox") -> None:
        tools = () if tools is None else tools
        if isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Iterable):
            expected = "an iterable of tools or functions (put a single one in a list)"
            raise refuse(where, "tools", expected, tools)
        self._tools: dict[str, Tool] = {}
        for n, item in enumerate(tools):
            t = as_tool(item, f"{where}: tools[{n}]")
            if t.name in self._tools:
                raise AgentConfigError(f"{where}: two tools are named {t.name!r}")
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
