"""The package contract: import direction, ``__all__`` of every public module, DESIGN §11 names."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

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
#: ``python -m eventlog`` hands over to the CLI in the top layer: the one documented exception
#: (the library never imports it; only the interpreter's ``-m`` entry point runs it).
ENTRY_POINT = ROOT / "eventlog" / "__main__.py"


def _python_files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("package", PACKAGES)
def test_layers_import_only_the_layers_below(package: str) -> None:
    offenders = []
    for path in _python_files(package):
        if path == ENTRY_POINT:
            continue
        forbidden = (_imported_roots(path) & set(PACKAGES)) - ALLOWED[package] - {package}
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
        drivers = _imported_roots(path) & DRIVER_MODULES
        if drivers or "os.fsync" in text:
            offenders.append(f"{path.relative_to(ROOT)}: {sorted(drivers) or 'os.fsync'}")
    assert offenders == []


def _public_modules() -> list[str]:
    names = []
    for package in PACKAGES:
        names.append(package)
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, prefix=f"{package}."):
            leaf = info.name.rsplit(".", 1)[-1]
            # Private modules, and entry-point scripts (``__main__``, the demo), are not API.
            if leaf.startswith("_") or leaf == "demo":
                continue
            names.append(info.name)
    return names


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
