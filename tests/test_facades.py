"""The walls between packages: implementation modules are private, other code imports facades.

The rules (docs/architecture.md, "Public faces and private modules"):

- A *facade* is a package ``__init__`` or a module users are documented to import by path; the
  list is :data:`FACADES`, written out here on purpose, so that making a module public is a
  decision someone takes in this file. :data:`SCRIPTS` are the modules users *run*
  (``python -m ...``), documented in the README and the Makefile.
- Every other module is an implementation module: its name starts with ``_``, or it lives in a
  sub-package whose name does (``agent.cli._commands``).
- An implementation module belongs to the nearest facade package above it (``eventlog._codec``
  to ``eventlog``, ``eventlog.stores.sqlite._ops`` to ``eventlog.stores.sqlite``). Only code
  inside that package (its own modules and its sub-packages) imports it; everything else imports
  a facade, and only names the facade lists in ``__all__``. So ``agent`` imports
  ``from eventlog import Row``, never ``from eventlog._codec import Row``, and ``agent.cli``
  imports ``from agent.report import run_spans``, never ``from agent.report._runs import ...``.
- Every import counts: module level, inside functions, under ``TYPE_CHECKING``.
- Every facade defines ``__all__``; ``tests/test_public_api.py`` checks it both ways over the
  same list.

Tests and benchmarks may import implementation modules where they are white-box tests of them.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Collection, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("eventlog", "projections", "recovery", "agent")

#: The public faces, each named in docs/api/*.md, the README or pyproject's extras.
FACADES = frozenset(
    {
        "eventlog",
        "eventlog.importers",
        "eventlog.stores",
        "eventlog.stores.postgres",
        "eventlog.stores.sqlite",
        "eventlog.testing",
        "projections",
        # docs/api/projections.md: writing a projection of your own; the inbox payload builders.
        "projections.base",
        "projections.inbox",
        "projections.header",
        "recovery",
        "recovery.testing",
        "agent",
        "agent.cli",
        "agent.integrations",
        # The README: each integration is imported by path, with its framework.
        "agent.integrations.langgraph",
        "agent.integrations.openai_agents",
        "agent.integrations.pydantic_ai",
        "agent.models",
        "agent.otel",
        "agent.report",
        "agent.web",
    }
)
#: Modules run with ``python -m``: ``python -m eventlog`` and ``python -m agent.cli`` (the
#: README), ``python -m agent.demo`` (``make demo``).
SCRIPTS = frozenset({"eventlog.__main__", "agent.cli.__main__", "agent.demo"})
#: Reach-throughs inside one top-level package still waiting for their redesign, each with the
#: reason; an entry that is no longer needed fails the test, so the list only shrinks. Across
#: top-level packages there are none, and none may be added.
KNOWN_REACH_THROUGHS: set[tuple[str, str]] = set()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(path): path for package in PACKAGES for path in (ROOT / package).rglob("*.py")
    }


MODULES = _modules()


def _is_private(name: str) -> bool:
    return name not in SCRIPTS and any(part.startswith("_") for part in name.split(".")[1:])


def _owner(name: str) -> str:
    """The facade package an implementation module belongs to: the nearest public one above."""
    parts = name.split(".")
    while len(parts) > 1 and (".".join(parts) not in FACADES or _is_private(".".join(parts))):
        parts.pop()
    return ".".join(parts)


def _imports(
    name: str, source: str, is_package: bool, modules: Collection[str] = MODULES
) -> Iterator[tuple[int, str, str | None]]:
    """Every import in a module as ``(line, module, name)``; ``name`` is None for ``import m``
    and for a ``from m import x`` whose ``x`` is itself a module of ``modules`` (then
    ``module`` is ``m.x``). Relative imports are resolved against ``name``."""
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            for alias in node.names:
                submodule = f"{module}.{alias.name}"
                if submodule in modules:
                    yield node.lineno, submodule, None
                else:
                    yield node.lineno, module, alias.name


def _offences(
    importer: str, source: str, is_package: bool = False, known: set[tuple[str, str]] | None = None
) -> Iterator[str]:
    """What is wrong with a module's imports; ``known`` collects the known reach-throughs met."""
    for line, module, attr in _imports(importer, source, is_package):
        if module.split(".")[0] not in PACKAGES:
            continue
        where = f"line {line}"
        if module in FACADES:
            exported = importlib.import_module(module).__all__
            if attr is not None and attr not in exported:
                yield f"{where} imports {attr} from {module}, which is not in its __all__"
        elif module in SCRIPTS:
            yield f"{where} imports the script {module}"
        else:
            owner = _owner(module)
            if importer == owner or importer.startswith(f"{owner}."):
                continue
            if (importer, module) in KNOWN_REACH_THROUGHS and importer.split(".")[0] == owner.split(
                "."
            )[0]:
                if known is not None:
                    known.add((importer, module))
                continue
            yield f"{where} imports {module}: outside {owner}, import the facade {owner}"


@pytest.mark.parametrize("package", PACKAGES)
def test_code_outside_a_package_imports_only_its_facades(package: str) -> None:
    known: set[tuple[str, str]] = set()
    offenders = [
        f"{path.relative_to(ROOT)} {offence}"
        for name, path in sorted(MODULES.items())
        if name.split(".")[0] == package
        for offence in _offences(name, path.read_text(), path.name == "__init__.py", known)
    ]
    assert offenders == []
    stale = {pair for pair in KNOWN_REACH_THROUGHS if pair[0].split(".")[0] == package} - known
    assert stale == set(), "these reach-throughs are gone: delete them from KNOWN_REACH_THROUGHS"


def test_every_module_is_a_facade_a_script_or_private() -> None:
    # A module with a public name that is not listed is API by accident: underscore it, or
    # list it above and document it.
    public = {name for name in MODULES if not _is_private(name)}
    assert sorted(public - FACADES - SCRIPTS) == []
    assert sorted((FACADES | SCRIPTS) - set(MODULES)) == []


@pytest.mark.parametrize("name", sorted(FACADES))
def test_every_facade_is_public_and_declares_all(name: str) -> None:
    assert not _is_private(name)
    assert isinstance(importlib.import_module(name).__all__, tuple)


def test_an_implementation_module_belongs_to_the_nearest_facade_above_it() -> None:
    assert _owner("eventlog._codec") == "eventlog"
    assert _owner("agent.cli._commands.transfer") == "agent.cli"
    assert _owner("eventlog.stores.sqlite._ops") == "eventlog.stores.sqlite"
    assert not _is_private("agent.demo")
    assert _is_private("agent.cli._commands")


@pytest.mark.parametrize(
    ("importer", "source", "refused"),
    [
        ("agent._probe", "from eventlog._codec import Row", True),
        ("agent._probe", "def f():\n    from eventlog._codec import Row", True),
        ("agent._probe", "import eventlog._codec", True),
        ("agent._probe", "from eventlog.stores import Row", False),
        ("agent._probe", "from eventlog import Nothing", True),
        ("agent.cli._probe", "from agent.report._runs import run_spans", True),
        ("agent.cli._probe", "from ..report import run_spans", False),
        ("agent.cli._probe", "from .._model import Model", False),
        ("agent._probe", "from .cli._main import main", True),
        ("eventlog.stores._probe", "from .._codec import Row", False),
    ],
)
def test_the_checker_refuses_reach_throughs(importer: str, source: str, refused: bool) -> None:
    # The checker itself, on made-up modules: a reach into another package's implementation is
    # refused wherever the import stands; the same names through the facade pass.
    assert bool(list(_offences(importer, source))) is refused


def test_every_facade_is_in_the_api_reference() -> None:
    # A public face users import is documented: each has a `::: name` block under docs/api.
    reference = "".join(page.read_text() for page in sorted((ROOT / "docs" / "api").glob("*.md")))
    shown = set(re.findall(r"^::: ([\w.]+)\s*$", reference, re.M))
    assert sorted(FACADES - shown) == []
    assert sorted(shown - FACADES) == []  # and nothing private is shown as public


_ROLE = re.compile(
    r":(?:class|func|meth|data|exc|attr|mod):`~?((?:eventlog|projections|recovery|agent)\.[\w.]+)`"
)


def _resolves(ref: str) -> bool:
    parts = ref.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


def test_every_docstring_cross_reference_names_something_that_exists() -> None:
    # The API reference showed "the contract of eventlog.stores.base.Store", a module renamed
    # long ago: a reference to a moved name is caught here instead.
    stale = sorted(
        f"{path.relative_to(ROOT)}: {ref}"
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        for ref in _ROLE.findall(path.read_text())
        if not _resolves(ref)
    )
    assert stale == []
