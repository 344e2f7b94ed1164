"""``make demo``: the money-comparison fix, killed mid-test and resumed in a new process.

A scripted model (no network) fixes a float-equality bug in ``ledger.py``: it reads the code and
the test in parallel, edits the comparison, and runs the test. The process is killed with
SIGKILL while the test tool runs. A new process resumes the session: recovery closes the turn
and answers the interrupted call ``TOOL_OUTCOME_UNKNOWN``; the model sees that, checks the file
state, reruns the test and finishes. The parent process then prints the account from the log.

Run: ``python -m agent.demo``. The project folder and its ``sessions.db`` are kept; the demo
ends with the ``eventlog`` commands that look at the run. Children:
``python -m agent.demo child run|resume DIR``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import anyio
import msgspec

from eventlog import Event, Message, Session, ToolCallPart, open_store
from projections import messages, timeline

from . import Agent, FunctionTool, ModelRequest, Response, ScriptedModel, ToolOutput, tool

__all__ = ("main",)

SESSION = "money-fix"
LEDGER = '''def same_amount(a: float, b: float) -> bool:
    """True when two money amounts are equal."""
    return a == b
'''
TEST = """from ledger import same_amount


def test_cents_add_up():
    assert same_amount(0.1 + 0.2, 0.3)
"""
BUGGY, FIXED = "return a == b", "return round(a * 100) == round(b * 100)"
STARTED = "tests-started"  # marker: the test tool's body is running


# -- the tools ----------------------------------------------------------------------------------


def make_tools(project: Path, *, stall_tests: bool) -> list[FunctionTool]:
    """read_file (safe in parallel), edit_file and run_tests (exclusive) over ``project``."""

    def resolve(path: str) -> Path:
        target = (project / path).resolve()
        if project.resolve() not in target.parents:
            raise ValueError(f"{path!r} is outside the project")
        return target

    @tool(safe=True)
    def read_file(path: str) -> str:
        """Read a file of the project."""
        return resolve(path).read_text()

    @tool
    def edit_file(path: str, old: str, new: str) -> ToolOutput:
        """Replace the text ``old`` by ``new`` in a file (exactly one occurrence)."""
        target = resolve(path)
        text = target.read_text()
        if text.count(old) != 1:
            return ToolOutput(content=f"{old!r} occurs {text.count(old)} times", is_error=True)
        target.write_text(text.replace(old, new))
        return ToolOutput(content=f"edited {path}")

    @tool
    async def run_tests() -> ToolOutput:
        """Run the project's tests."""
        (project / STARTED).write_text(str(os.getpid()))
        if stall_tests:
            await anyio.sleep(60)  # a slow suite: the demo's parent kills us here
        code = "import test_ledger as t; t.test_cents_add_up(); print('1 passed')"
        result = await anyio.run_process([sys.executable, "-c", code], cwd=project, check=False)
        out = (result.stdout + result.stderr).decode().strip().splitlines()
        return ToolOutput(content=out[-1] if out else "", is_error=result.returncode != 0)

    return [read_file, edit_file, run_tests]


# -- the scripted model: decides from what it is shown, so it works across processes -----------


def _call(call_id: str, name: str, **args: str) -> ToolCallPart:
    return ToolCallPart(id=call_id, name=name, arguments=msgspec.json.encode(args).decode())


def model_script(request: ModelRequest) -> Response:
    """The model's next reply, from the tool results it has seen so far."""
    results: dict[str, tuple[str, bool]] = {}
    for message in request.messages:
        for part in message.tool_results:
            results[part.call_id] = (part.text, part.is_error)
    if "read-ledger" not in results:
        return Response(
            text="Let me read the code and its test.",
            tool_calls=[
                _call("read-ledger", "read_file", path="ledger.py"),
                _call("read-test", "read_file", path="test_ledger.py"),
            ],
        )
    if "edit-ledger" not in results:
        return Response(
            text="same_amount compares floats with ==; 0.1 + 0.2 is not exactly 0.3. "
            "Compare whole cents instead.",
            tool_calls=[_call("edit-ledger", "edit_file", path="ledger.py", old=BUGGY, new=FIXED)],
        )
    if "test-1" not in results:
        return Response(text="Now the test.", tool_calls=[_call("test-1", "run_tests")])
    first_run, interrupted = results["test-1"]
    if interrupted and "verify-ledger" not in results:
        return Response(
            text="The test run was interrupted and its outcome is unknown. Before rerunning, "
            "let me check whether my edit is in place.",
            tool_calls=[_call("verify-ledger", "read_file", path="ledger.py")],
        )
    if interrupted and "test-2" not in results:
        verified = FIXED in results["verify-ledger"][0]
        text = "The edit is in place; running the tests is safe to repeat." if verified else ""
        return Response(text=text, tool_calls=[_call("test-2", "run_tests")])
    final = results.get("test-2", (first_run, interrupted))[0]
    return Response(text=f"Fixed: same_amount now compares whole cents. Tests: {final}.")


# -- the child processes -----------------------------------------------------------------------


async def child(mode: str, workdir: Path) -> None:
    """``run``: start the session and the fix (stalls in the test); ``resume``: finish it."""
    project = workdir / "project"
    model = ScriptedModel(model_script, name="scripted-fixer")
    tools = make_tools(project, stall_tests=mode == "run")
    system = "You fix bugs in the user's project. Verify before you repeat side effects."
    async with open_store(f"sqlite:///{workdir / 'sessions.db'}") as store:
        if mode == "run":
            agent = Agent(await store.create(session_id=SESSION), model, tools, system=system)
            await agent.prompt(
                "The money comparison in ledger.py is wrong: test_ledger.py fails. Fix it.",
                request_id="ticket-42",
            )
        else:
            agent = await Agent.resume(store, SESSION, model, tools, system=system)
            await agent.prompt("We were restarted. Please carry on.", request_id="restart-1")
        await agent.run_until_idle()
        await agent.session.aclose()


# -- the parent: orchestrate, then tell the story from the log ---------------------------------


def _spawn(mode: str, workdir: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "agent.demo", "child", mode, str(workdir)])


def _kill_when_tests_run(proc: subprocess.Popen[bytes], marker: Path) -> float:
    deadline = time.monotonic() + 30
    while not marker.exists():  # bounded poll: waiting on another process
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"demo: the first process ended early ({proc.returncode})")
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return time.monotonic()


def _describe(event: Event) -> str:
    d = event.data
    t = event.type
    if t in ("turn/start", "turn/end"):
        return f"turn {d.turn}" + (f" ended: {d.reason}" if t == "turn/end" else "")
    if t in ("step/start", "step/end"):
        return f"step {d.turn}.{d.step}"
    if t == "user/message":
        return repr(_short(d.message.text))
    if t == "assistant/message":
        calls = ", ".join(f"{c.name}#{c.id}" for c in d.message.tool_calls)
        return f"{_short(d.message.text)!r}" + (f" -> {calls}" if calls else "")
    if t == "tool/call":
        return f"{d.name}#{d.call_id} {d.arguments}"
    if t in ("tool/result", "tool/outcome"):
        msg = d.message if t == "tool/result" else d.result
        part = msg.tool_results[0]
        code = f" [{d.error.code}]" if d.error else ""
        who = " (written by recovery)" if msg.source and msg.source.kind == "recovery" else ""
        return f"#{part.call_id}{code}{who}: {_short(part.text)!r}"
    if t == "agent/inbox/spliced":
        verb = d.outcome or "queued"
        return f"{d.target} {verb} {len(d.inserted) or d.removed} item(s)"
    if t == "request/header":
        return f"model={d.model} tools={[s.name for s in d.tools or ()]}"
    return ""


def _short(text: str, width: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _fates(session: Session) -> list[str]:
    view = timeline(session)
    events = session.window(0)
    lines = []
    for call in view.calls():
        result = events[call.result].data if call.result is not None else None
        if result is None:
            fate = "no result"
        elif result.error is not None:
            fate = f"{result.error.code} ({result.error.name})"
        else:
            fate = "ok: " + _short(result.message.tool_results[0].text, 40)
        seqs = f"call@{call.call} result@{call.result}"
        lines.append(
            f"  {call.turn}.{call.step}  {call.name:<10} #{call.call_id:<14} {seqs:<20} {fate}"
        )
    return lines


def _seen_after_recovery_at(session: Session) -> int:
    """The seq after which the first model request following the repair was made."""
    events = session.window(0)
    repaired = next(
        e.seq for e in events if e.type == "turn/end" and e.data.reason == "interrupted"
    )
    return next(e.seq for e in events[repaired:] if e.type == "assistant/message") - 1


def _seen_after_recovery(session: Session) -> list[Message]:
    """The messages of the first model request after the repair closed the crashed turn."""
    return list(messages(session, at=_seen_after_recovery_at(session)))


async def report(workdir: Path, killed: str) -> int:
    """Print the account from the log; return the seq after which the model next saw it all
    (its first request after recovery)."""
    async with open_store(f"sqlite:///{workdir / 'sessions.db'}") as store:
        # The whole log in memory: the account prints every event and folds the messages
        # the model saw at a past seq (``messages(at=...)`` reads events in memory); the
        # demo's session is a few dozen events, so the full open costs nothing.
        session = await store.open(SESSION, verify="full")
        async with session:
            print("\n== The log (one line per event) ==")
            for event in await session.events():
                indent = "" if event.type.startswith(("turn/", "agent/")) else "    "
                print(f"{event.seq:>4}  {indent}{event.type:<22}{_describe(event)}")
            print("\n== Each tool call and its fate (turn.step, tool, id, seqs, fate) ==")
            print("\n".join(_fates(session)))
            print(f"\n== The crash ==\n  {killed}")
            print("\n== What the model saw after recovery (its next request, last messages) ==")
            for message in _seen_after_recovery(session)[-3:]:
                text = message.text or message.tool_results[0].text
                body = textwrap.fill(text, 92, initial_indent="    ", subsequent_indent="    ")
                print(f"  [{message.role}]\n{body}")
            final = messages(session)[-1].text
            print(f"\n== How it ended ==\n  model: {final}")
            ledger = (workdir / "project" / "ledger.py").read_text().splitlines()[-1].strip()
            print(f"  ledger.py now: {ledger}")
            return _seen_after_recovery_at(session)


def main() -> None:
    if len(sys.argv) >= 4 and sys.argv[1] == "child":
        anyio.run(child, sys.argv[2], Path(sys.argv[3]))
        return
    # Kept after the demo (not a TemporaryDirectory): its database is there to look at.
    workdir = Path(tempfile.mkdtemp(prefix="eventlog-demo-"))
    project = workdir / "project"
    project.mkdir()
    (project / "ledger.py").write_text(LEDGER)
    (project / "test_ledger.py").write_text(TEST)
    print(
        "demo: a scripted coding agent fixes a money comparison; its process is killed\n"
        "      with SIGKILL while the tests run, and a new process resumes the session."
    )
    print(f"demo: project and sessions.db in {workdir}")
    first = _spawn("run", workdir)
    _kill_when_tests_run(first, project / STARTED)
    killed = f"process {first.pid} was killed with SIGKILL while run_tests#test-1 was running"
    print(f"demo: {killed}")
    second = _spawn("resume", workdir)
    if second.wait() != 0:
        raise SystemExit(f"demo: the resuming process failed ({second.returncode})")
    print("demo: a new process resumed the session and finished the work")
    at = anyio.run(report, workdir, killed)
    print(_look_at_it(workdir / "sessions.db", at))


def _look_at_it(database: Path, at: int) -> str:
    """The closing lines: where the database is kept and the commands that look at the run
    (``replay --at`` shows what the model saw right after recovery)."""
    db = f"sqlite:///{database}"
    command = _eventlog_command()
    return "\n".join(
        [
            f"\n== Look at the run yourself (the database is kept: {database}) ==",
            f"  {command} --db {db} audit {SESSION}",
            f"  {command} --db {db} replay {SESSION} --at {at}",
            f"  {command} --db {db} show {SESSION}",
            f"  {command} --db {db} serve      # the timeline in a browser (extra: web)",
        ]
    )


def _eventlog_command() -> str:
    """How to call the ``eventlog`` command of *this* interpreter from the user's shell.

    ``make demo`` runs in the project's virtualenv, which the user's shell has usually not
    activated: a bare ``eventlog`` would then be "command not found", or someone else's. So the
    bare name is printed only when the shell's ``PATH`` finds this very script; otherwise its
    path (relative to the working directory when it lies below it)."""
    script = Path(sys.executable).parent / "eventlog"
    found = shutil.which("eventlog")
    if found is not None and Path(found).resolve() == script.resolve():
        return "eventlog"
    if not script.exists():
        return f"{sys.executable} -m eventlog"
    try:
        return str(script.relative_to(Path.cwd()))
    except ValueError:
        return str(script)


if __name__ == "__main__":
    main()
