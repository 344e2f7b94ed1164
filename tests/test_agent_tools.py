"""Tools: schemas from typed functions and Structs, argument decoding, bodies, the toolbox."""

from __future__ import annotations

import anyio
import msgspec
import pytest

from agent import FunctionTool, Tool, ToolArgumentsError, Toolbox, ToolContext, ToolOutput, tool
from eventlog import ToolSpec, open_store

pytestmark = pytest.mark.anyio


class Edit(msgspec.Struct, kw_only=True):
    path: str
    old: str
    new: str = ""


@tool(safe=True)
def read_file(path: str, limit: int = 100) -> str:
    """Read a file."""
    return f"{path}:{limit}"


@tool
async def edit(args: Edit) -> ToolOutput:
    """Edit a file."""
    return ToolOutput(content=f"{args.path}: {args.old} -> {args.new}", concludes_turn=True)


@tool(name="whoami", description="Who is calling.")
def with_context(context: ToolContext) -> str:
    return f"{context.turn}.{context.step} {context.call_id}"


async def _context() -> ToolContext:
    async with open_store("memory:") as store:
        session = await store.create()
    return ToolContext(session, 2, 3, "c9", anyio.Event())


def test_a_typed_function_gets_a_json_schema() -> None:
    assert isinstance(read_file, Tool)
    assert read_file.name == "read_file"
    assert read_file.description == "Read a file."
    assert read_file.parameters == {
        "type": "object",
        "properties": {"path": {"type": "string"}, "limit": {"type": "integer", "default": 100}},
        "required": ["path"],
    }


def test_a_struct_parameter_is_the_schema() -> None:
    assert edit.parameters == {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "old": {"type": "string"},
            "new": {"type": "string", "default": ""},
        },
        "required": ["path", "old"],
    }
    assert edit.spec == ToolSpec(
        name="edit", description="Edit a file.", parameters=edit.parameters
    )


def test_arguments_are_decoded_and_validated() -> None:
    assert read_file.decode('{"path": "a.py"}').limit == 100
    with pytest.raises(ToolArgumentsError) as caught:
        read_file.decode('{"path": 3}')
    assert str(caught.value) == (
        "invalid arguments for tool 'read_file': Expected `str`, got `int` - at `$.path`"
    )
    with pytest.raises(ToolArgumentsError, match="invalid arguments for tool 'edit'"):
        edit.decode("{not json")


def test_empty_arguments_mean_an_empty_object() -> None:
    with pytest.raises(ToolArgumentsError, match="missing required field `path`"):
        read_file.decode("  ")


async def test_bodies_run_sync_or_async_and_may_take_the_context() -> None:
    context = await _context()
    out = await read_file.call(read_file.decode('{"path": "x", "limit": 5}'), context)
    assert out == ToolOutput(content="x:5")
    out = await edit.call(edit.decode('{"path": "p", "old": "a", "new": "b"}'), context)
    assert out.content == "p: a -> b" and out.concludes_turn
    out = await with_context.call(with_context.decode("{}"), context)
    assert out.content == "2.3 c9"
    assert with_context.name == "whoami"
    assert "context" not in with_context.parameters.get("properties", {})


def test_concurrency_safety_defaults_to_false_and_may_depend_on_arguments() -> None:
    assert read_file.is_concurrency_safe(None)
    assert not edit.is_concurrency_safe(None)
    reader = FunctionTool(read_file.fn, safe=lambda args: args.limit < 10)
    assert reader.is_concurrency_safe(reader.decode('{"path": "a", "limit": 3}'))
    assert not reader.is_concurrency_safe(reader.decode('{"path": "a", "limit": 30}'))


def test_the_toolbox_refuses_two_tools_with_one_name() -> None:
    with pytest.raises(ValueError, match="two tools are named 'read_file'"):
        Toolbox([read_file, read_file])
    box = Toolbox([read_file, edit])
    assert [s.name for s in box.specs()] == ["read_file", "edit"]
    assert box.get("nope") is None
