"""The README's quickstart runs unchanged against every embedded store URL."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def _quickstart() -> str:
    text = README.read_text()
    match = re.search(r"<!-- quickstart:.*?-->\s*```python\n(.*?)```", text, re.S)
    assert match, "README has no quickstart block"
    return match.group(1)


@pytest.mark.parametrize("scheme", ["memory:", "sqlite"])
def test_the_quickstart_runs(
    scheme: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _quickstart()
    assert len(code.strip().splitlines()) <= 17
    # Run the block as written, except that anyio.run is called with this test's URL.
    url = "memory:" if scheme == "memory:" else f"sqlite:///{tmp_path / 'sessions.db'}"
    calls: list[Any] = []
    monkeypatch.setattr(anyio, "run", lambda fn, *a: calls.append(fn))
    namespace: dict[str, Any] = {}
    exec(compile(code, str(README), "exec"), namespace)
    monkeypatch.undo()
    anyio.run(calls[0], url)
    assert capsys.readouterr().out.strip() == "['turn/start', 'user/message', 'turn/end']"
