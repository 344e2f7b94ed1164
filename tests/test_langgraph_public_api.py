"""The LangGraph saver depends on LangGraph's public API only.

The rule (docs/langgraph.md, "What the saver relies on"): the integration's modules
(``agent/integrations/langgraph.py`` and ``agent/integrations/_langgraph_*.py``) build every
answer themselves from LangGraph's public types. They

- import from LangGraph only public modules and public names (no ``_`` part or name), and
  nothing from ``langgraph.checkpoint.memory``;
- never name ``InMemorySaver`` (or its alias ``MemorySaver``): driving LangGraph's reference
  saver means relying on its internal dicts, which a LangGraph release may change silently;
- read underscored attributes only of ``self``, and only those the integration's own classes
  define; none of those shadows an underscored attribute of ``BaseCheckpointSaver``.

The checker runs on a probe holding each violation first, so that it cannot pass by finding
nothing. A second test holds the saver's answers to the reference saver's over one scenario
that reaches every branch those answers have (namespaces, special and repeated writes, task
paths, empty channels, ``list``'s filters, the ``DeltaChannel`` history).
"""

from __future__ import annotations

import ast
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    empty_checkpoint,
)
from langgraph.checkpoint.memory import InMemorySaver

from agent.integrations.langgraph import EventlogSaver, langgraph_types
from eventlog import open_store

ROOT = Path(__file__).resolve().parent.parent
#: Special channels: a write to one replaces the task's stored one.
ERROR, INTERRUPT = "__error__", "__interrupt__"
assert {ERROR, INTERRUPT} <= WRITES_IDX_MAP.keys()
_BANNED_NAMES = frozenset({"InMemorySaver", "MemorySaver"})
_BANNED_MODULES = frozenset({"langgraph.checkpoint.memory"})


def _integration_modules() -> list[Path]:
    folder = ROOT / "agent" / "integrations"
    return sorted([folder / "langgraph.py", *folder.glob("_langgraph_*.py")])


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _own_attributes(trees: list[ast.Module]) -> set[str]:
    """Underscored names the integration's classes define: methods, class attributes and
    ``self._x = ...`` assignments."""
    own: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                        own.add(item.name)
                    elif isinstance(item, ast.Assign | ast.AnnAssign):
                        targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                        own.update(t.id for t in targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                if isinstance(node.value, ast.Name) and node.value.id == "self":
                    own.add(node.attr)
    return {name for name in own if _private(name)}


def violations(sources: dict[str, str]) -> list[str]:
    """Every place in ``sources`` (name -> Python text) that breaks the rule, as
    ``name:line: what``."""
    trees = {name: ast.parse(text) for name, text in sources.items()}
    own = _own_attributes(list(trees.values()))
    found = [
        f"(own attribute {name!r} shadows BaseCheckpointSaver's)"
        for name in sorted(own & {n for n in dir(BaseCheckpointSaver) if _private(n)})
    ]
    for where, tree in trees.items():
        found.extend(f"{where}:{line}: {what}" for line, what in _breaches(tree, own))
    return found


def _breaches(tree: ast.Module, own: set[str]) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield from _module_breaches(line, node.module, [a.name for a in node.names])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield from _module_breaches(line, alias.name, [])
        elif isinstance(node, ast.Name) and node.id in _BANNED_NAMES:
            yield line, f"names {node.id}"
        elif isinstance(node, ast.Attribute):
            if node.attr in _BANNED_NAMES:
                yield line, f"names {node.attr}"
            elif _private(node.attr):
                on_self = isinstance(node.value, ast.Name) and node.value.id == "self"
                if not on_self or node.attr not in own:
                    yield line, f"reads {ast.unparse(node)}, an attribute it does not define"


def _module_breaches(line: int, module: str, names: list[str]) -> Iterator[tuple[int, str]]:
    if module.split(".")[0] not in {"langgraph", "langchain_core"}:
        return
    if module in _BANNED_MODULES or any(_private(part) for part in module.split(".")):
        yield line, f"imports {module}, not a public LangGraph module"
    for name in names:
        if _private(name) or name in _BANNED_NAMES:
            yield line, f"imports {name} from {module}"


_PROBE = """
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.base import _with_msgpack_allowlist
import langgraph.checkpoint._internal
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

class Probe(BaseCheckpointSaver):
    def __init__(self):
        self._mine = 1
        self._is_protocol = True

    def read(self, other, saver):
        self._mine
        self._theirs
        other._mine
        self.serde._reviver
        saver.memory.InMemorySaver
        return MemorySaver
"""


def test_the_checker_finds_every_kind_of_breach_in_a_probe() -> None:
    found = "\n".join(violations({"probe": _PROBE}))
    for expected in (
        "shadows BaseCheckpointSaver's",
        "probe:2: imports langgraph.checkpoint.memory",
        "probe:2: imports InMemorySaver from",
        "probe:3: imports _with_msgpack_allowlist from",
        "probe:4: imports langgraph.checkpoint._internal",
        "probe:14: reads self._theirs",
        "probe:15: reads other._mine",
        "probe:16: reads self.serde._reviver",
        "probe:17: names InMemorySaver",
        "probe:18: names MemorySaver",
    ):
        assert expected in found, expected
    assert "probe:13" not in found  # self._mine: the class's own
    assert "probe:5" not in found  # public names from a public module
    assert violations({"clean": "from langgraph.checkpoint.base import CheckpointTuple\n"}) == []


def test_the_integration_uses_langgraphs_public_api_only() -> None:
    modules = _integration_modules()
    names = {path.name for path in modules}
    assert {"langgraph.py", "_langgraph_saver.py", "_langgraph_tuples.py"} <= names
    sources = {str(path.relative_to(ROOT)): path.read_text() for path in modules}
    assert violations(sources) == []


# -- the same answers as LangGraph's reference saver ------------------------------------------


def _config(ns: str = "", checkpoint_id: str | None = None) -> RunnableConfig:
    inner: dict[str, Any] = {"thread_id": "t", "checkpoint_ns": ns}
    if checkpoint_id is not None:
        inner["checkpoint_id"] = checkpoint_id
    return {"configurable": inner}


async def _scenario(saver: BaseCheckpointSaver[Any]) -> list[Any]:
    """Puts and writes in two namespaces, then every read; returns the answers."""
    rng = random.Random(7)
    parents: dict[str, str | None] = {"": None, "child:1": None}
    for step in range(12):
        ns = "" if step % 3 else "child:1"
        checkpoint = empty_checkpoint()
        checkpoint["id"] = f"1ef-{step:04d}"
        checkpoint["ts"] = f"2026-01-01T00:00:{step:02d}+00:00"
        # "log" keeps a value only every fourth step (a seed for the delta history); "flag"
        # is empty at odd steps (versions bumped without a value).
        values = {"count": step, "log": [step]} if step % 4 == 0 else {"count": step}
        versions: ChannelVersions = {"count": step + 1, "log": step + 1, "flag": step + 1}
        checkpoint["channel_values"] = {**values, **({"flag": True} if step % 2 == 0 else {})}
        checkpoint["channel_versions"] = versions
        new = {k: v for k, v in versions.items() if rng.random() < 0.8 or k == "count"}
        put = await saver.aput(
            _config(ns, parents[ns]), checkpoint, {"step": step, "source": "loop"}, new
        )
        parents[ns] = put["configurable"]["checkpoint_id"]
        for task in ("b", "a"):
            writes = [("log", f"{task}{step}"), ("count", step)]
            await saver.aput_writes(put, writes, f"task-{task}", task_path=f"~{task}")
        await saver.aput_writes(put, [("log", "again")], "task-a", task_path="~a")  # kept once
        if step % 5 == 0:
            await saver.aput_writes(put, [(ERROR, "first"), (INTERRUPT, 1)], "task-c")
            await saver.aput_writes(put, [(ERROR, "second")], "task-c")  # replaces
    answers: list[Any] = []
    for ns in ("", "child:1", "nowhere"):
        answers.append(await saver.aget_tuple(_config(ns)))
        # By id: one with special writes, one of the child namespace.
        answers.extend([await saver.aget_tuple(_config(ns, i)) for i in ("1ef-0010", "1ef-0003")])
        answers.append([t async for t in saver.alist(_config(ns))])
        answers.append([t async for t in saver.alist(_config(ns), filter={"step": 4})])
        answers.append([t async for t in saver.alist(_config(ns), limit=2)])
        answers.append([t async for t in saver.alist(None, before=_config(ns, "1ef-0007"))])
        channels = ["log", "count", "flag"]
        answers.extend(
            [
                await saver.aget_delta_channel_history(config=_config(ns, at), channels=channels)
                for at in (None, "1ef-0010", "1ef-0009")
            ]
        )
    answers.append([t async for t in saver.alist(None, filter={"source": "loop"}, limit=5)])
    return answers


@pytest.mark.anyio
async def test_the_answers_are_the_reference_savers() -> None:
    expected = await _scenario(InMemorySaver())
    async with open_store("memory:", types=langgraph_types()) as store:
        async with EventlogSaver(store) as saver:
            assert await _scenario(saver) == expected
