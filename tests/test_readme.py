"""The README's code runs: the quickstart against every embedded store URL, the real-model
block against the loopback provider server, the own-model recipe in an agent, the property
test with the imports the docstring of ``recovery.testing`` shows."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import pytest

from eventlog import open_store
from projections import messages

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


def _block(marker: str) -> str:
    match = re.search(rf"<!-- {marker}:.*?-->\s*```python\n(.*?)```", README.read_text(), re.S)
    assert match, f"README has no {marker} block"
    return match.group(1)


def test_the_real_model_block_runs_against_an_openai_compatible_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.llm_server import LLMServer, Reply, openai_events

    # The loopback server answers with a weather call, then the reply.
    call = [("call_1", "weather", '{"city": "Paris"}')]
    replies = [Reply(events=openai_events(calls=call)), Reply(events=openai_events(text="Sunny."))]
    with LLMServer(*replies) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-readme")
        monkeypatch.setenv("OPENAI_MODEL", "readme-model")
        monkeypatch.chdir(tmp_path)  # the block's sessions.db lands here
        exec(compile(_block("real-model"), str(README), "exec"), {"__name__": "readme"})
    assert capsys.readouterr().out == "Sunny.\n"
    assert [body["model"] for body in server.bodies] == ["readme-model"] * 2
    assert server.bodies[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "sunny in Paris",
    }
    assert (tmp_path / "sessions.db").exists()


def test_the_own_model_block_is_a_model() -> None:
    from agent import Agent, Model

    namespace: dict[str, Any] = {}
    exec(compile(_block("own-model"), str(README), "exec"), namespace)
    echo: Model = namespace["Echo"]()

    async def scenario() -> str:
        async with open_store("memory:") as store:
            agent = Agent(await store.create(), echo)
            agent.followup("ping")
            (outcome,) = await agent.run_until_idle()
            assert outcome.reason == "completed"
            return messages(agent.session)[-1].text

    assert anyio.run(scenario) == "ping"


def test_the_property_test_block_passes() -> None:
    import recovery.testing

    # The imports the block leaves out are the first lines of the docstring's full example.
    full = recovery.testing.__doc__ or ""
    imports = [line.strip() for line in full.splitlines() if line.startswith("    from ")]
    imports += ["import anyio", "from hypothesis import given, strategies as st"]
    namespace: dict[str, Any] = {}
    # Not named after README.md: its lines are not the file's, and hypothesis reads the source.
    code = "\n".join([*imports, _block("property-test")])
    exec(compile(code, "<README.md property-test block>", "exec"), namespace)
    test = namespace["test_recovers_from_a_crash_at_any_write"]
    # First a run that compacts, crashed after its last write: the restarted process opens it
    # from its snapshot, so a block that leaves out a step the invariants need fails here.
    from eventlog import Replace

    run = next(
        run
        for run in map(recovery.testing.random_run, range(100))
        if any(isinstance(event.surface, Replace) for event in run.events)
    )
    test.hypothesis.inner_test(run=run, crash_at=30)
    # Then the hypothesis test itself, with the test profile's examples.
    test()


def _marked_blocks(text: str) -> dict[str, str]:
    return dict(re.findall(r"<!-- ([\w-]+):.*?-->\s*```python\n(.*?)```", text, re.S))


def test_the_docs_pages_show_the_blocks_the_readme_tests_run() -> None:
    # The guides under docs/ repeat the README's runnable blocks; the tests run the README's
    # copy, so each guide's copy must be the same text, or a guide could drift into code that
    # no longer runs.
    readme = _marked_blocks(README.read_text())
    compared = 0
    for page in sorted((README.parent / "docs").glob("*.md")):
        for marker, code in _marked_blocks(page.read_text()).items():
            assert marker in readme, f"{page.name} shows a {marker} block the README does not run"
            assert code == readme[marker], f"{page.name}'s {marker} block differs from the README's"
            compared += 1
    assert compared >= 4  # the LangGraph, Agents SDK, real-model and own-model guides
