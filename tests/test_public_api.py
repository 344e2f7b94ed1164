"""The package contract: import direction, two-way ``__all__``, the names docs/ promises."""

from __future__ import annotations

import ast
import importlib
import logging
from pathlib import Path
from typing import TypeVar

import pytest

from tests.test_facades import FACADES

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("eventlog", "projections", "recovery", "agent")

#: What each layer may import from the project's other layers.
ALLOWED = {
    "eventlog": set(),
    "projections": {"eventlog"},
    "recovery": {"eventlog", "projections"},
    "agent": {"eventlog", "projections", "recovery"},
}
#: Only the stores touch database drivers or fsync.
DRIVER_MODULES = {"aiosqlite", "sqlite3", "asyncpg"}


def _python_files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _imported_roots(source: str) -> set[str]:
    """The top-level packages ``source`` imports: by import statements, and by name at run
    time (``importlib.import_module("agent.cli")``, ``__import__("agent")``)."""
    roots: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and node.args and _imports_by_name(node.func):
            name = node.args[0]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                roots.add(name.value.split(".")[0])
    return roots


def _imports_by_name(func: ast.expr) -> bool:
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return called in {"import_module", "__import__"}


@pytest.mark.parametrize(
    ("source", "roots"),
    [
        ("import agent.cli", {"agent"}),
        ("from recovery import scan", {"recovery"}),
        ("import importlib\nimportlib.import_module('agent.cli')", {"importlib", "agent"}),
        (
            "from importlib import import_module\nimport_module('projections')",
            {"importlib", "projections"},
        ),
        ("__import__('agent')", {"agent"}),
        ("from . import _codec\nimportlib.import_module(name)", set()),
    ],
)
def test_the_layer_checker_sees_imports_by_name(source: str, roots: set[str]) -> None:
    # The old ``python -m eventlog`` imported ``agent.cli`` by a string: such an import counts.
    assert _imported_roots(source) == roots


@pytest.mark.parametrize("package", PACKAGES)
def test_layers_import_only_the_layers_below(package: str) -> None:
    offenders = []
    for path in _python_files(package):
        forbidden = (
            (_imported_roots(path.read_text()) & set(PACKAGES)) - ALLOWED[package] - {package}
        )
        if forbidden:
            offenders.append(f"{path.relative_to(ROOT)} imports {sorted(forbidden)}")
    assert offenders == []


@pytest.mark.parametrize("package", PACKAGES)
def test_only_stores_touch_drivers_and_fsync(package: str) -> None:
    stores = ROOT / "eventlog" / "stores"
    offenders = []
    for path in _python_files(package):
        if stores in path.parents:
            continue
        text = path.read_text()
        drivers = _imported_roots(text) & DRIVER_MODULES
        if drivers or "os.fsync" in text:
            offenders.append(f"{path.relative_to(ROOT)}: {sorted(drivers) or 'os.fsync'}")
    assert offenders == []


def _public_modules() -> list[str]:
    # The facades (tests/test_facades.py keeps the list and checks that every other module is
    # private); the scripts run with ``python -m`` are not API.
    return sorted(FACADES)


@pytest.mark.parametrize("name", _public_modules())
def test_every_public_module_declares_all_and_it_resolves(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert isinstance(exported, tuple), f"{name} has no __all__ tuple"
    missing = [attr for attr in exported if not hasattr(module, attr)]
    assert missing == [], f"{name}.__all__ names missing attributes"


DESIGN_NAMES = {
    "eventlog": (
        "open_store Store Session Event APPEND Replace EventTypes Message TextPart "
        "ReasoningPart ToolCallPart ToolResultPart TurnStart TurnEnd StepStart StepEnd "
        "UserMessage AssistantMessage AssistantAttempt ToolCall ToolOutcome ToolResult "
        "RequestHeader InboxSpliced CompactionStart CompactionSummary CompactionEnd "
        "SessionForked EventLogError ValidationError UnknownEventTypeError SurfaceError "
        "ConflictError SessionBusyError SessionNotFoundError SessionExistsError "
        "StoreWriteError BacklogFullError CorruptLogError UnsupportedFormatError ClosedError"
        # content (wave 2)
        " ImagePart FilePart RedactedReasoningPart attachment_digest AttachmentNotFoundError"
    ),
    "projections": "surface messages inbox timeline to_openai to_anthropic to_openai_responses",
    "recovery": "scan repair Diagnosis RepairReport",
    "recovery.testing": "agent_runs FaultyStore check_invariants",
}


@pytest.mark.parametrize("module_name", sorted(DESIGN_NAMES))
def test_the_names_design_promises_are_exported(module_name: str) -> None:
    module = importlib.import_module(module_name)
    missing = [n for n in DESIGN_NAMES[module_name].split() if n not in module.__all__]
    assert missing == []


def test_errors_share_one_root_and_validation_is_a_value_error() -> None:
    import eventlog

    for name in eventlog.__all__:
        obj = getattr(eventlog, name)
        if isinstance(obj, type) and issubclass(obj, BaseException):
            assert issubclass(obj, eventlog.EventLogError), name
    assert issubclass(eventlog.ValidationError, ValueError)


def _defined_public_names(module_name: str) -> set[str]:
    """The public names a module binds itself: top-level functions, classes and assignments, and
    in a package's ``__init__`` what it imports from its own modules (its re-exported API)."""
    module = importlib.import_module(module_name)
    path = Path(module.__file__ or "")
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom) and node.level > 0 and path.name == "__init__.py":
            names.update(alias.asname or alias.name for alias in node.names)
    # A module's logger and its type variables are plumbing, not API.
    return {
        name
        for name in names
        if not name.startswith("_")
        and not isinstance(getattr(module, name, None), logging.Logger | TypeVar)
    }


@pytest.mark.parametrize("name", _public_modules())
def test_every_public_name_is_listed_in_all(name: str) -> None:
    # The other direction of the check above: a public name the module defines (or a package
    # re-exports from its own modules) but leaves out of __all__ is API by accident.
    module = importlib.import_module(name)
    unlisted = sorted(_defined_public_names(name) - set(getattr(module, "__all__", ())))
    assert unlisted == [], f"{name} defines public names missing from __all__"


def test_projections_exports_its_read_api() -> None:
    # The package's face is what an app reads; writing machinery stays in its modules.
    import projections

    read_api = {
        *"surface messages inbox timeline to_openai to_anthropic to_openai_responses".split(),
        "request_header",
        *"messages_at timeline_at".split(),  # the same reads, on a session opened from a snapshot
        *"openai_request anthropic_request openai_tools anthropic_tools".split(),
        "ANTHROPIC_DEFAULT_MAX_TOKENS",
        "SNAPSHOT_STATES",  # the codecs of the states snapshots carry by default
        *"Surface MessagesView Inbox Timeline ToolCallState OpenTurn OpenStep".split(),
        *"CallKey CallStatus Finding Attachments Degrade".split(),
    }
    assert set(projections.__all__) == read_api


def test_tool_error_codes_are_defined_once() -> None:
    # Recovery defines every code a tool result can carry (its own and the agent's); the agent
    # and the report import them. No other module assigns one of these names.
    import agent
    import recovery
    from recovery import _codes

    codes = {name for name in vars(_codes) if name.isupper()}
    assert len(codes) == 11
    assert codes <= set(recovery.__all__)
    assert all(getattr(recovery, name) == name for name in codes)  # a code reads as its name
    assert {name for name in codes if hasattr(agent, name)} == codes - {
        "TOOL_NOT_STARTED",
        "TOOL_OUTCOME_UNKNOWN",
    }
    definers = set()
    for package in PACKAGES:
        for path in _python_files(package):
            for node in ast.parse(path.read_text()).body:
                targets = node.targets if isinstance(node, ast.Assign) else []
                if any(isinstance(t, ast.Name) and t.id in codes for t in targets):
                    definers.add(str(path.relative_to(ROOT)))
    assert definers == {"recovery/_codes.py"}
