"""The store's wall: outside ``eventlog/stores`` nothing reaches through ``store.backend``.

The CLI, the report, the web app and the testing helpers use the public store API
(``LogStore.record``, ``read_rows``, ``restore``, ``drop_lease``, ``simulate_crash``,
``watch_lease_refusals``, ``options_over``); the backend under a store is the store's business.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("eventlog", "projections", "recovery", "agent")
STORES = ROOT / "eventlog" / "stores"


def _backend_accesses(source: str, filename: str) -> list[int]:
    """The lines of ``source`` that read or write an attribute named ``backend``."""
    tree = ast.parse(source, filename=filename)
    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr == "backend"
    )


def test_the_finder_sees_every_kind_of_backend_access() -> None:
    # Reads, calls through it, assignments and a getattr-free chain are all attribute nodes.
    source = (
        "x = store.backend\n"
        "await store.backend.close()\n"
        "store.backend.acquire_lease = watched\n"
        "y = self.store.backend.read_rows('s', 0, 1)\n"
        "backend = 1  # a plain name is not an access\n"
    )
    assert _backend_accesses(source, "<sample>") == [1, 2, 3, 4]


def test_no_package_outside_the_stores_reaches_through_store_backend() -> None:
    offenders = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.is_relative_to(STORES):
                continue
            lines = _backend_accesses(path.read_text(), str(path))
            offenders += [f"{path.relative_to(ROOT)}:{line}" for line in lines]
    assert offenders == []
