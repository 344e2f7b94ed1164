"""Hostile text in an approval (the policy's reason, the arguments the model wrote, who decided
and why) is data wherever it is shown: ``eventlog approvals`` (table and JSON), ``eventlog
audit``, a refused ``eventlog deny`` and the web page print it with every character a terminal
could act on escaped, and the page with HTML escaped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from agent import Agent, Response, ScriptedModel, tool
from eventlog import open_store
from tests.cli_fixtures import run_main, url_of

#: A window retitle (OSC 0), a screen clear (CSI 2J), a bidi override and markup.
OSC = "\x1b]0;owned\x07"
CSI = "\x1b[2J"
BIDI = "\u202e"
SCRIPT = "<script>alert(1)</script>"
RAW = ("\x1b", "\x07", "\u202e")


def policy(args: Any) -> str:
    return f"policy says {OSC}{SCRIPT}"


@tool(approval=policy)
def wipe(target: str) -> str:
    """Wipe a target."""
    return "wiped"


async def _waiting(db: Path) -> str:
    calls = [("wipe", '{"target": "' + "\\u001b[2J" + BIDI + '"}')]
    model = ScriptedModel([Response(tool_calls=calls)])
    async with open_store(url_of(db)) as store:
        agent = Agent(await store.create(session_id="h"), model, [wipe])
        agent.followup("wipe it")
        await agent.run_until_idle()
        (pending,) = await agent.pending_approvals()
        await agent.session.aclose()
        return pending.call_id


def _clean(text: str) -> None:
    for char in RAW:
        assert char not in text, f"{char!r} reached the terminal"


def test_hostile_text_in_an_approval_is_shown_as_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from starlette.testclient import TestClient

    # A terminal wide enough that the tables show each text whole (at 80 columns they cut
    # it, and the escaped form would be cut with it).
    monkeypatch.setenv("COLUMNS", "400")

    from agent.web import create_app

    db = tmp_path / "hostile.db"
    call_id = anyio.run(_waiting, db)

    # Waiting: the list and the audit show the policy's reason and the arguments, escaped.
    for args in (
        ("approvals",),
        ("approvals", "--pending"),
        ("--json", "approvals"),
        ("audit", "h"),
    ):
        shown = run_main(*args, db=db)
        _clean(shown.stdout + shown.stderr)
        assert "\\u001b]0;owned\\u0007" in shown.stdout, args

    # The person who decides writes hostile text too.
    by, why = f"ana{CSI}{BIDI}", f"no {OSC}{SCRIPT}"
    decided = run_main("deny", "h", call_id, "--by", by, "--reason", why, db=db)
    assert decided.returncode == 0, decided.stderr
    _clean(decided.stdout)
    # A second, conflicting decision is refused; its message names the first, escaped.
    refused = run_main("approve", "h", call_id, "--by", by, db=db)
    assert refused.returncode == 2
    _clean(refused.stderr)
    for args in (("approvals",), ("--json", "approvals"), ("audit", "h")):
        shown = run_main(*args, db=db)
        _clean(shown.stdout + shown.stderr)
        assert "\\u202e" in shown.stdout, args

    # The page escapes HTML: the markup is text, never an element.
    with TestClient(create_app(url_of(db)), base_url="http://localhost") as client:
        page = client.get("/s/h").text
        assert SCRIPT not in page
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
