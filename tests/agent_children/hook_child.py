"""A child process whose agent records a hook decision, then hangs in the model stream until
killed.

Each hook call appends a line ``<hook> <turn> <step>`` to the marker file (how the parent counts
the calls across processes). Mode ``before_step``: the hook plans step 1 (another system
prompt), and the model hangs at the request. Mode ``should_continue``: the model answers step 1,
the hook asks for another step, and the model hangs at step 2's request. Either way the model
prints ``requested`` on stdout when it is called (the decision was flushed before: the request
checkpoint, or the step-end one), the parent's cue to SIGKILL it::

    python -m tests.agent_children.hook_child sqlite:///x.db SESSION_ID MARKER MODE
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio

from agent import Agent, Chunk, Finish, ModelRequest, StepContext, StepPlan, TextDelta
from eventlog import open_store


def counting(marker: Path, hook: str, answer: object) -> object:
    """A hook that notes each call in ``marker`` and gives ``answer``."""

    def hook_fn(ctx: StepContext) -> object:
        with marker.open("a") as out:
            out.write(f"{hook} {ctx.turn} {ctx.step}\n")
        return answer

    return hook_fn


class HangingModel:
    """Answers the first ``answers`` requests with text, then hangs in the stream."""

    name = "hanging"

    def __init__(self, answers: int) -> None:
        self.answers = answers
        self.calls = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        self.calls += 1
        if self.calls <= self.answers:
            yield TextDelta(text=f"answer {self.calls}")
            yield Finish(kind="stop")
            return
        print("requested", flush=True)
        await anyio.sleep_forever()  # the parent kills the process here
        yield Finish(kind="stop")  # unreachable


async def main(url: str, session_id: str, marker: Path, mode: str) -> None:
    async with open_store(url) as store:
        session = await store.create(session_id=session_id)
        if mode == "before_step":
            hooks = {"before_step": counting(marker, mode, StepPlan(system="planned"))}
            model = HangingModel(answers=0)
        else:
            hooks = {"should_continue": counting(marker, mode, True)}
            model = HangingModel(answers=1)
        agent = Agent(session, model, system="usual", **hooks)  # type: ignore[arg-type]
        agent.followup("start")
        await agent.run_until_idle()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4])
