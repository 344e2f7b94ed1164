"""pydantic-ai: the per-run overhead of ``EventlogHistory`` against no persistence at all.

Figure (issue 30, "Measure"): one conversation of R runs of a pydantic-ai ``Agent`` on its own
``FunctionModel`` (no network: what is measured is the persistence, not a provider), each run
a user prompt, one tool call and a text answer (four messages), the history passed to the next
run as ``message_history``. Per run, wall time of:

- ``none``: the history kept in memory only (a list);
- ``json file``: what ``ModelMessagesTypeAdapter`` users write by hand, the whole history
  dumped to a file and fsynced after each run;
- ``EventlogHistory``: ``history.messages()`` in, ``await history.record(result)`` out, on
  ``sqlite:///`` (default durability: each ``record`` returns once fsynced);
- ``EventlogHistory + DurableToolset``: the tools wrapped too (a ``tool/call`` and a
  ``tool/outcome`` flushed around each body: two more fsyncs per run).

The variants run in the same process, alternating, rotating the order; the overhead of each is
its per-run time minus the ``none`` time of the same round, in wall time and in the process's
CPU time (which a machine shared with other work disturbs less; fsync waits are not in it).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from agent.integrations.pydantic_ai import EventlogHistory, pydantic_ai_types
from eventlog import open_store

from ._harness import Figure, Stats, print_figure

__all__ = ("VARIANTS", "main")

FULL = ((50, 5), (200, 3))
QUICK = ((20, 2),)
#: One measurement: (wall seconds, CPU seconds of the process: every thread, the store's too).
_Clock = tuple[float, float]


def _now() -> _Clock:
    return time.perf_counter(), time.process_time()


def _since(start: _Clock) -> _Clock:
    wall, cpu = _now()
    return wall - start[0], cpu - start[1]


def _reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if isinstance(messages[-1].parts[-1], UserPromptPart):
        call = ToolCallPart("weather", {"city": "Oslo"}, tool_call_id=f"c{len(messages)}")
        return ModelResponse(parts=[TextPart("Let me look."), call])
    return ModelResponse(parts=[TextPart("Sunny in Oslo, 21 degrees.")])


def _tools() -> FunctionToolset[Any]:
    tools: FunctionToolset[Any] = FunctionToolset()

    @tools.tool_plain
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}, 21 degrees"

    return tools


_AGENT: Agent[None, str] = Agent(FunctionModel(_reply))
_TOOLS = _tools()


async def _none(path: Path, runs: int) -> _Clock:
    history: list[ModelMessage] = []
    start = _now()
    for i in range(runs):
        result = await _AGENT.run(f"Weather {i}?", message_history=history, toolsets=[_TOOLS])
        history = result.all_messages()
    return _since(start)


async def _json_file(path: Path, runs: int) -> _Clock:
    file = path / "history.json"
    start = _now()
    for i in range(runs):
        history = ModelMessagesTypeAdapter.validate_json(file.read_bytes()) if i else []
        result = await _AGENT.run(f"Weather {i}?", message_history=history, toolsets=[_TOOLS])
        with file.open("wb") as out:
            out.write(ModelMessagesTypeAdapter.dump_json(result.all_messages()))
            out.flush()
            os.fsync(out.fileno())
    return _since(start)


async def _eventlog(path: Path, runs: int, *, durable: bool) -> _Clock:
    async with open_store(f"sqlite:///{path / 'h.db'}", types=pydantic_ai_types()) as store:
        history = await EventlogHistory.open(store, "bench")
        toolsets = [history.durable(_TOOLS) if durable else _TOOLS]
        start = _now()
        for i in range(runs):
            result = await _AGENT.run(
                f"Weather {i}?", message_history=history.messages(), toolsets=toolsets
            )
            await history.record(result)
        seconds = _since(start)
        await history.log.aclose()
    return seconds


async def _history(path: Path, runs: int) -> _Clock:
    return await _eventlog(path, runs, durable=False)


async def _durable(path: Path, runs: int) -> _Clock:
    return await _eventlog(path, runs, durable=True)


VARIANTS: dict[str, Callable[[Path, int], Coroutine[Any, Any, _Clock]]] = {
    "none": _none,
    "json file": _json_file,
    "EventlogHistory": _history,
    "EventlogHistory + DurableToolset": _durable,
}


def _measure(runs: int, rounds: int) -> dict[str, list[_Clock]]:
    """Per-run milliseconds (wall, CPU) of each variant, one pair per round."""
    results: dict[str, list[_Clock]] = {name: [] for name in VARIANTS}
    names = list(VARIANTS)
    for index in range(rounds):
        shift = index % len(names)
        for name in names[shift:] + names[:shift]:
            with tempfile.TemporaryDirectory() as tmp:
                wall, cpu = asyncio.run(VARIANTS[name](Path(tmp), runs))
            results[name].append((wall * 1000 / runs, cpu * 1000 / runs))
    return results


def main(*, quick: bool = False) -> None:
    print("(one conversation of R runs; each run: prompt, one tool call, answer; per-run ms)")
    for runs, rounds in QUICK if quick else FULL:
        results = _measure(runs, rounds)
        for name, values in results.items():
            for which, clock in (("wall", 0), ("CPU", 1)):
                stats = Stats(tuple(v[clock] for v in values))
                print_figure(Figure(f"R={runs}, {name}: per run, {which}", stats, "ms"))
        for name in (name for name in VARIANTS if name != "none"):
            for which, clock in (("wall", 0), ("CPU", 1)):
                extra = [
                    v[clock] - n[clock] for v, n in zip(results[name], results["none"], strict=True)
                ]
                median = statistics.median(extra)
                print(
                    f"R={runs}, {name}: overhead per run, {which} {median:.2f} ms "
                    f"(min–max {min(extra):.2f}–{max(extra):.2f})",
                    flush=True,
                )
