"""The layout the architecture is read from (docs/architecture.md, "The layout").

Three rules over every module of ``eventlog``, ``projections``, ``recovery`` and ``agent``:

- **No import cycle.** The module graph has an edge from a module to each module it imports,
  resolved as :func:`tests.test_facades._imports` resolves them (``from pkg import name`` is
  an edge to ``pkg.name`` when that is a module, else to ``pkg``; relative imports resolved).
  Every import counts: module level, inside functions and under ``TYPE_CHECKING``. An import
  deferred into a function or behind ``TYPE_CHECKING`` still makes the two modules one thing
  to read and change together; it only hides the cycle from the interpreter. (A function-level
  import that defers an optional extra, with no cycle behind it, is fine.)

  How package ``__init__`` re-exports count: importing ``eventlog.stores._base`` makes Python
  run ``eventlog/stores/__init__.py`` first, but that implicit parent import is *not* an edge,
  or every package whose ``__init__`` re-exports its own modules would be a cycle with each of
  them. Only the modules an import *names* are edges. So an ``__init__`` importing its private
  modules, and those importing their siblings, is a tree; a private module that imports its own
  package's facade (``from eventlog import X`` inside ``eventlog._x``, while ``eventlog``
  imports ``eventlog._x``) names the ``__init__`` and closes a cycle, which the test reports.
- **No library module over 500 lines.**
- **The agent loop apart.** The tools that read stores (``agent.cli``, ``agent.web``,
  ``agent.report``, ``agent.otel``) and the framework integrations (``agent.integrations``)
  never reach the agent loop (``agent._loop``), directly or through any module they import
  (the ``agent`` facade, ``agent.models``); only ``agent``'s ``__init__``, ``agent.models`` and
  ``agent.demo`` import the loop's modules.

Each rule's checker is tried on made-up modules first, so a checker that finds nothing is
known to be able to find something.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from tests.test_facades import MODULES, ROOT, _imports

#: The longest a library module may be (docs/architecture.md: small modules, one concept each).
MAX_LINES = 500
#: The agent loop's package, and the tools and integrations that stand apart from it.
LOOP = "agent._loop"
APART = ("agent.cli", "agent.web", "agent.report", "agent.otel", "agent.integrations")
#: The only modules outside the loop that import its modules, besides the ``agent`` facade.
LOOP_USERS = ("agent.models", "agent.demo")

Graph = dict[str, set[str]]


def _within(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == package or name.startswith(f"{package}.") for package in packages)


def _edges(name: str, source: str, is_package: bool, modules: Mapping[str, object]) -> set[str]:
    """The modules of ``modules`` that ``name`` (with ``source``) imports, itself left out."""
    found = set()
    for _, module, _ in _imports(name, source, is_package, modules):
        # ``import a.b.c`` of a module not in the graph names the nearest one above it.
        while module and module not in modules:
            module = module.rpartition(".")[0]
        if module and module != name:
            found.add(module)
    return found


def _graph(sources: Mapping[str, tuple[str, bool]]) -> Graph:
    """The import graph of ``{module: (source, is_package)}``."""
    return {
        name: _edges(name, source, is_package, sources)
        for name, (source, is_package) in sources.items()
    }


def _reached(graph: Graph, start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others."""
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph.get(module, ()))
    return seen


def _cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module, each sorted, in order."""
    reach = {name: _reached(graph, name) for name in graph}
    found = {
        tuple(sorted(name for name in reach[start] if start in reach[name]))
        for start in graph
        if start in reach[start]
    }
    return [list(cycle) for cycle in sorted(found)]


def _project_sources() -> dict[str, tuple[str, bool]]:
    return {name: (path.read_text(), path.name == "__init__.py") for name, path in MODULES.items()}


SOURCES = _project_sources()
GRAPH = _graph(SOURCES)


# -- no import cycle ------------------------------------------------------------------------


def _probe(**modules: str) -> Graph:
    """The graph of made-up modules, named with ``__`` for dots (a trailing ``__`` marks a
    package ``__init__``)."""
    sources = {}
    for key, source in modules.items():
        is_package = key.endswith("__")
        sources[key.strip("_").replace("__", ".")] = (source, is_package)
    return _graph(sources)


def test_the_cycle_checker_finds_cycles_and_only_cycles() -> None:
    # Two modules importing each other, even one of them only inside a function or under
    # TYPE_CHECKING: one cycle, named.
    assert _cycles(_probe(pkg__a="from .b import x", pkg__b="def f():\n    from .a import y")) == [
        ["pkg.a", "pkg.b"]
    ]
    hidden = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import y"
    assert _cycles(_probe(pkg__a="from .b import x", pkg__b=hidden)) == [["pkg.a", "pkg.b"]]
    # A facade re-exporting its private modules, which import each other in one direction: no
    # cycle (the implicit import of the parent package is not an edge).
    tree = _probe(
        pkg__="from ._a import x\nfrom ._b import y", pkg___a="from ._b import y", pkg___b=""
    )
    assert _cycles(tree) == []
    # A private module importing its own package's facade, which imports it: a cycle; and one
    # naming the package's submodule by ``from . import _b`` is an edge to that module.
    facade = _probe(pkg__="from ._a import x", pkg___a="from pkg import z")
    assert _cycles(facade) == [["pkg", "pkg._a"]]
    assert _probe(pkg___a="from . import _b", pkg___b="")["pkg._a"] == {"pkg._b"}
    # A longer loop, through a package: one component holding all of it.
    ring = _probe(a__="from b import x", b__="from c._d import y", c__="", c___d="import a")
    assert _cycles(ring) == [["a", "b", "c._d"]]


def test_no_import_cycle_anywhere() -> None:
    # Each cycle is listed with the imports that close it, to say which one to move.
    cycles = [
        {name: sorted(GRAPH[name] & set(cycle)) for name in cycle} for cycle in _cycles(GRAPH)
    ]
    assert cycles == []


# -- no module over 500 lines -----------------------------------------------------------------


def _oversized(lines: Mapping[str, int]) -> list[str]:
    """The files over :data:`MAX_LINES`, each with its length."""
    return [f"{path}: {n} lines" for path, n in sorted(lines.items()) if n > MAX_LINES]


def test_the_size_checker_names_the_file_and_its_length() -> None:
    lines = {"pkg/_long.py": 501, "pkg/_fine.py": 500, "pkg/_short.py": 120}
    assert _oversized(lines) == ["pkg/_long.py: 501 lines"]


def test_no_library_module_over_500_lines() -> None:
    lines = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines()) for path in MODULES.values()
    }
    assert _oversized(lines) == [], "split these into modules of one concept each"


# -- the agent loop apart ---------------------------------------------------------------------


def _in_loop(module: str) -> bool:
    return _within(module, (LOOP,))


def _loop_offences(graph: Graph, name: str) -> list[str]:
    """What is wrong with ``name``'s place relative to the agent loop."""
    if _in_loop(name):
        return []
    offences = []
    direct = sorted(filter(_in_loop, graph[name]))
    if direct and not (name == "agent" or _within(name, LOOP_USERS)):
        offences.append(f"{name} imports the loop's {direct}")
    if _within(name, APART):
        through = sorted(
            module
            for module in graph[name]
            if _in_loop(module) or any(map(_in_loop, _reached(graph, module)))
        )
        if through:
            offences.append(f"{name} reaches the agent loop through {through}")
    return offences


def _with_probe(name: str, source: str) -> Graph:
    graph = {module: set(edges) for module, edges in GRAPH.items()}
    graph[name] = _edges(name, source, False, {**SOURCES, name: (source, False)})
    return graph


@pytest.mark.parametrize(
    ("name", "source", "refused"),
    [
        ("agent.cli._probe", "from agent import Agent", True),
        ("agent.web._probe", "from .. import ScriptedModel", True),
        ("agent.report._probe", "def f():\n    from agent._loop._tools import tool", True),
        ("agent.otel._probe", "from agent.models import OpenAIChat", True),  # models use the loop
        ("agent.integrations._probe", "from .._loop._model import Model", True),
        (
            "agent.integrations._probe",
            "from eventlog import Session\nfrom ..report import counted",
            False,
        ),
        ("agent.cli._probe", "from ..integrations import register_langgraph_types", False),
        ("agent.models._probe", "from .._loop._model import Model", False),
        ("agent._probe", "from ._loop._tools import tool", True),  # only the facade, models, demo
    ],
)
def test_the_loop_checker_refuses_what_reaches_the_loop(
    name: str, source: str, refused: bool
) -> None:
    assert bool(_loop_offences(_with_probe(name, source), name)) is refused


def test_the_tools_and_integrations_never_import_the_agent_loop() -> None:
    offences = [offence for name in sorted(GRAPH) for offence in _loop_offences(GRAPH, name)]
    assert offences == []
    # And the loop is there to keep apart from: the facade does import it.
    assert any(_within(module, (LOOP,)) for module in GRAPH["agent"])
