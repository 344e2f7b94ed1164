"""Stored content reaches the terminal as data: a property over every command that prints it.

Hostile strings (OSC window titles, clipboard writes and hidden hyperlinks, CSI clear-screen,
C1 controls, BEL, NUL, CR, backspace, bidi overrides and isolates, zero-width and invisible tag
characters, rich markup and emoji codes) are stored in message text, reasoning, tool names,
call ids, arguments, error codes, model errors, the request header, session metadata and an app
event's payload. Every command that prints stored content runs in every output format it has
(plain lines and tables, tables with colour forced as on a terminal, JSON, JSON lines); no
control character but newline and tab reaches stdout or stderr, except the colour codes rich
itself writes when colour is on. JSON output is also lossless: it decodes to the stored text.
(Lone surrogates cannot be stored: msgspec refuses to encode them.)
"""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agent.cli._safe import KEPT, terminal_safe
from eventlog import (
    APPEND,
    AssistantAttempt,
    AssistantMessage,
    EventTypes,
    Message,
    RequestHeader,
    StepEnd,
    StepStart,
    ToolCall,
    ToolCallPart,
    ToolError,
    ToolResult,
    ToolSpec,
    TurnEnd,
    TurnStart,
    UserMessage,
    open_store,
)

from .cli_fixtures import run_main, url_of

#: Sequences a terminal acts on, and markup a renderer might.
ATTACKS = (
    "\x1b]0;pwned\x07",  # OSC 0: window title
    "\x1b]52;c;cm0gLXJmIH4=\x07",  # OSC 52: clipboard write
    "\x1b]8;;https://evil.example\x1b\\click me\x1b]8;;\x1b\\",  # OSC 8: hidden hyperlink
    "\x1b[2J\x1b[H",  # CSI: clear the screen, cursor home
    "\x1b[8m",  # SGR conceal
    "\x9b2J",  # C1 CSI
    "\x9d0;title\x9c",  # C1 OSC ... ST
    "\x07\x00\x08\r\x0b\x0c\x7f",  # BEL NUL BS CR VT FF DEL
    "\u202egnp.exe\u202c",  # RLO ... PDF
    "\u2066isolate\u2069\u200e\u200f\u061c",
    "\u200b\ufeff\u2028\u2029\u00ad",
    "\U000e0049\U000e0067\U000e006e",  # invisible tag characters
    "[bold red]markup[/] [link=https://evil.example]x[/link] :warning:",
)
ALL_ATTACKS = "".join(ATTACKS)
hostile = st.lists(
    st.one_of(st.sampled_from(ATTACKS), st.text(st.characters(codec="utf-8"), max_size=4)),
    min_size=1,
    max_size=4,
).map("".join)

#: rich's own colour codes (SGR), the only escapes allowed when colour is forced.
_SGR = re.compile(r"\x1b\[[0-9;]*m")


class AppNote(msgspec.Struct, frozen=True, kw_only=True):
    text: str


def unsafe_in(output: str) -> list[str]:
    """The characters of ``output`` a terminal could act on or hide."""
    return [
        f"U+{ord(c):04X}"
        for c in output
        if c not in KEPT and unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")
    ]


async def store_hostile(url: str, text: str) -> None:
    """Two sessions holding ``text`` everywhere it can be stored: ``done`` (finished, a failed
    call) and ``cut`` (a crash left its call dangling)."""
    types = EventTypes()
    types.register("app/note", AppNote, ignorable=True)  # the reader does not know it
    async with open_store(url, types=types) as store:
        for sid in ("done", "cut"):
            session = await store.create(sid, metadata={"note": text, text: "key"})
            call = ToolCallPart(id=f"{sid}:{text}", name=text, arguments=json.dumps({"a": text}))
            header = RequestHeader(
                system=text,
                model=text,
                tools=(ToolSpec(name=text, description=text),),
                params={text: text},
            )
            session.append("turn/start", TurnStart(turn=1))
            session.append("user/message", UserMessage(message=Message.user(text)), surface=APPEND)
            session.append("request/header", header)
            session.append("step/start", StepStart(turn=1, step=1))
            session.append("assistant/attempt", AssistantAttempt(turn=1, step=1, error=text))
            reply = Message.assistant(text, tool_calls=(call,), reasoning=text)
            session.append(
                "assistant/message", AssistantMessage(turn=1, step=1, message=reply), surface=APPEND
            )
            session.append("app/note", AppNote(text=text))
            session.append(
                "tool/call",
                ToolCall(turn=1, step=1, call_id=call.id, name=text, arguments=call.arguments),
            )
            if sid == "done":
                result = ToolResult(
                    turn=1,
                    step=1,
                    message=Message.tool_result(call.id, text, is_error=True),
                    error=ToolError(name=text, code=text),
                )
                session.append("tool/result", result, surface=APPEND)
                session.append("step/end", StepEnd(turn=1, step=1))
                session.append("turn/end", TurnEnd(turn=1, reason="completed"))
            await session.aclose()


#: Every command that prints stored content, in each of its output formats.
COMMANDS: tuple[tuple[str, ...], ...] = (
    ("sessions",),
    ("sessions", "--json"),
    ("show", "done", "--all"),
    ("show", "done", "--json"),
    ("replay", "done"),
    ("replay", "done", "--json"),
    ("replay", "done", "--format", "openai"),
    ("replay", "done", "--format", "anthropic"),
    ("audit", "done"),
    ("audit", "done", "--json"),
    ("audit", "cut"),
    ("audit", "cut", "--json"),
    ("verify", "--all"),
    ("verify", "--all", "--json"),
    ("recover", "cut"),
    ("recover", "cut", "--json"),
    ("follow", "done", "--count", "11"),
    ("follow", "done", "--count", "11", "--json"),
    ("recover", "cut", "--apply"),  # last: it writes (the closers name the calls)
)


def run_all(db: Path) -> dict[tuple[str, ...], Any]:
    return {args: run_main(*args, db=db) for args in COMMANDS}


@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(text=hostile, colour=st.booleans())
@example(text=ALL_ATTACKS, colour=False)
@example(text=ALL_ATTACKS, colour=True)
def test_no_stored_control_character_reaches_the_terminal(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    text: str,
    colour: bool,
) -> None:
    # The hostile text, stored everywhere it can be.
    db = tmp_path_factory.mktemp("hostile") / "hostile.db"
    anyio.run(store_hostile, url_of(db), text)
    # Colour forced as on a terminal (rich then writes its own SGR codes), or plain.
    monkeypatch.setenv("FORCE_COLOR" if colour else "NO_COLOR", "1")
    monkeypatch.delenv("NO_COLOR" if colour else "FORCE_COLOR", raising=False)
    results = run_all(db)
    for args, result in results.items():
        for stream in (result.stdout, result.stderr):
            shown = _SGR.sub("", stream) if colour else stream
            assert unsafe_in(shown) == [], (args, shown[:2000])
        assert "Traceback" not in result.stderr, (args, result.stderr)
        # Every command ran (1 is a finding: the failed call, the crash).
        assert result.returncode in (0, 1), (args, result.stderr)
        assert result.stdout, args
    # JSON is lossless: the stored text comes back exactly.
    shown = json.loads(results[("show", "done", "--json")].stdout)["events"]
    assert shown[1]["data"]["message"]["content"][0]["text"] == text
    audit = json.loads(results[("audit", "done", "--json")].stdout)
    assert [c["name"] for c in audit["calls"]] == [text]
    assert audit["calls"][0]["error"]["code"] == text
    assert json.loads(results[("sessions", "--json")].stdout)["sessions"][0]["metadata"] == {
        "note": text,
        text: "key",
    }
    # The text is shown as data, escaped, not dropped (rich's Text drops BEL and CR itself),
    # where it is shown whole (show and follow clip their one-line summaries).
    for args in (("replay", "done"), ("audit", "done"), ("recover", "cut")):
        shown = _SGR.sub("", results[args].stdout)
        for char in set(text) & {"\x07", "\x1b", "\r", "\x9b", "\u202e"}:
            assert terminal_safe(char) in shown, (args, char)


def test_the_rule_escapes_every_control_and_format_character() -> None:
    # Every code point of the categories a terminal acts on or hides, but the kept ones.
    for point in range(sys.maxunicode + 1):
        char = chr(point)
        category = unicodedata.category(char)
        if char in KEPT or category not in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            continue
        escaped = terminal_safe(char)
        assert escaped != char and unsafe_in(escaped) == [], f"U+{point:04X}"
    # JSON-valid escapes: a JSON string through the rule decodes to the same text.
    assert json.loads(terminal_safe(json.dumps(ALL_ATTACKS, ensure_ascii=False))) == ALL_ATTACKS
    # Clean text is returned as it is (no copy); newline, tab and joiners are kept.
    clean = "naïve 日本語 👩\u200d💻\tend\n"
    assert terminal_safe(clean) is clean
