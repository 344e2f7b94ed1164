"""The distribution's name on the package index is ``agent-eventlog``: ``eventlog`` there is an
unrelated, older project, so every install command users are shown must name ours."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAME = "agent-eventlog"


def _user_facing_texts() -> dict[str, str]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    files += sorted(
        p
        for d in ("eventlog", "projections", "recovery", "agent")
        for p in (ROOT / d).rglob("*.py")
    )
    return {str(path.relative_to(ROOT)): path.read_text() for path in files}


def test_the_project_is_published_under_a_name_of_its_own() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == NAME
    # The extras that name the project itself name it by its distribution name.
    for extra, requirements in project["optional-dependencies"].items():
        for requirement in requirements:
            assert not requirement.startswith("eventlog["), (extra, requirement)


def test_every_install_command_shown_to_users_installs_this_project() -> None:
    shown = 0
    for where, text in _user_facing_texts().items():
        for match in re.finditer(r"pip install (?:--\S+ )*'?([\w.-]+)(\[[^\]]*\])?'?", text):
            package = match[1]
            if package in {"eventlog", NAME}:
                assert package == NAME, f"{where}: {match[0]!r} installs someone else's project"
                shown += 1
    assert shown >= 10  # the install page, the README and the missing-extra messages
