"""Import fuzzing of dsh logs (``eventlog import --from dsh``): each hostile line ends the run
one of three ways. Refused (exit 2): one line naming file and line, the database files
byte-identical. Imported with events not imported as themselves or changed on the way in
(exit 1, or 0 with ``--accept-departures``): the report names each one's file:line and why.
Imported as it is (exit 0). Never a traceback (``main`` runs in this process)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .cli_fixtures import run_main
from .test_import_fuzz import (
    ABYSS,
    DEEP,
    NEAR,
    Mutation,
    damage,
    files_of,
    import_refused_whole,
    judge,
    seeded_db,
)

HEADER = b'{"type":"session","version":0,"id":"harness-run","createdAt":1000}'
USER = {"role": "user", "id": "u1", "content": [{"type": "text", "text": "hi"}]}


def _line(type_: str, data: Any, **envelope: Any) -> bytes:
    return json.dumps({"type": type_, "data": data, **envelope}).encode()


def base_log() -> list[bytes]:
    """A small dsh log, one entry per line (line 1 the header): a turn with a user message
    and a plugin event."""
    return [
        HEADER,
        _line("turn/start", {"turn": 1}, time=2000),
        _line("step/start", {"turn": 1, "step": 1}, time=2001),
        _line("user/message", USER, surfaceOp="append", time=2002),
        _line("plugin/thing", {"k": 1}, time=2003),
        _line("step/end", {"turn": 1, "step": 1}, time=2004),
        _line("turn/end", {"turn": 1, "reason": "completed"}, time=2005),
    ]


def _nested(levels: int) -> bytes:
    return b'{"deep":' + b"[" * levels + b"1" + b"]" * levels + b"}"


def _replace(line: int, text: bytes, code: int) -> Mutation:
    """Line ``line`` (1-based) becomes ``text``."""
    return Mutation(lambda lines: lines.__setitem__(line - 1, text), code, None, line)


def _plugin(data: bytes, code: int) -> Mutation:
    return _replace(5, b'{"type":"plugin/thing","data":' + data + b',"time":2003}', code)


#: Each mutation of the base log and how the import must end.
MUTATIONS: dict[str, Mutation] = {
    "nothing changed": Mutation(lambda lines: None, 0, None, None),
    "a payload nested past reading": _plugin(_nested(ABYSS), 2),
    "a payload nested too deep": _plugin(_nested(DEEP), 1),
    "a payload nested hundreds deep": _plugin(_nested(NEAR), 1),
    "a core payload nested hundreds deep": _replace(
        4,
        b'{"type":"user/message","surfaceOp":"append","data":{"role":"user","id":"u1",'
        b'"content":[{"type":"text","text":"hi"}],"x":' + _nested(NEAR) + b"}}",
        1,
    ),
    "a line key the format does not have": _replace(
        3, _line("step/start", {"turn": 1, "step": 1}, extra={"lost": True}), 1
    ),
    "a chunk naming its turn by a list": _replace(
        5, b'{"type":"text-chunks","data":{"turn":[1],"step":1,"texts":["a"]}}', 1
    ),
    "a payload over the size limit": _plugin(json.dumps({"k": "x" * 9_000_000}).encode(), 1),
    "an integer past 64 bits": _plugin(b'{"k":1180591620717411303424}', 1),
    "a number past a float": _plugin(b'{"k":1e999}', 2),
    "NaN": _plugin(b'{"k":NaN}', 2),
    "Infinity": _plugin(b'{"k":Infinity}', 2),
    "bytes that are not UTF-8": _plugin(b'{"k":"\xff\xfe"}', 2),
    "a lone surrogate": _plugin(b'{"k":"\\ud800"}', 2),
    "a payload that is not an object": _plugin(b"[1, 2]", 1),
    "a core payload of the wrong type": _replace(2, _line("turn/start", {"turn": "1"}), 1),
    "a core payload that is not an object": _replace(2, _line("turn/start", [1]), 1),
    "a turn out of order": _replace(2, _line("turn/start", {"turn": 2}), 1),
    "a truncated line": _replace(4, _line("user/message", USER)[:25], 2),
    "a negative time": _replace(3, _line("step/start", {"turn": 1, "step": 1}, time=-1), 2),
    "a time as a string": _replace(3, _line("step/start", {"turn": 1, "step": 1}, time="5"), 2),
    "a backwards time": _replace(6, _line("step/end", {"turn": 1, "step": 1}, time=1), 1),
    "a source naming no event": _replace(
        4, _line("user/message", USER, surfaceOp="append", sourceEventSeqs=[9]), 1
    ),
    "sources that are not seqs": _replace(
        4, _line("user/message", USER, surfaceOp="append", sourceEventSeqs="a"), 2
    ),
    "a duplicate seq": _replace(3, _line("step/start", {"turn": 1, "step": 1}, seq=0), 2),
    "an unknown surface operation": _replace(
        4, _line("user/message", USER, surfaceOp={"op": "swap"}), 2
    ),
    "a replace naming no event": _replace(
        4,
        _line("user/message", USER, surfaceOp={"op": "replace", "start": 7, "end": 9}),
        1,
    ),
    "a header nested too deep": _replace(1, HEADER[:-1] + b',"x":' + _nested(DEEP) + b"}", 2),
    "a header nested past reading": _replace(1, HEADER[:-1] + b',"x":' + _nested(ABYSS) + b"}", 2),
    "a header that is not an object": _replace(1, b"[1]", 2),
    "a line that is not an object": _replace(5, b'"text"', 2),
}


def _judge_log(mutation: Mutation, *, accept: bool = False) -> None:
    lines = base_log()
    mutation.apply(lines)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        judge(
            path, seeded_db(Path(tmp)), mutation, accept=accept, dsh=True, session_id="harness-run"
        )


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_a_mutated_dsh_log_is_imported_reported_or_refused_never_half(name: str) -> None:
    # The base log with one line changed, imported into a database holding another session.
    mutation = MUTATIONS[name]
    _judge_log(mutation)
    if mutation.code == 1:
        # Accepted explicitly: the same report, exit 0.
        _judge_log(mutation, accept=True)


@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_any_line_damaged_byte_by_byte_is_refused_or_imported(data: st.DataObject) -> None:
    # The base log, one line cut short, or a byte inserted or replaced.
    lines = base_log()
    damage(lines, data)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        # Refused: one line naming file and line, nothing written (checked in the helper).
        result = import_refused_whole(path, seeded_db(Path(tmp)), "--from", "dsh")
        said = f"exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
        if result.returncode == 2:
            return
        if result.returncode == 1:
            # Imported, each event not imported as itself (or changed) listed by file:line
            # (a changed time may show at the line after the damaged one).
            listed = [t for t in result.stdout.splitlines() if t.startswith("  /")]
            assert listed, said
            assert all(t.startswith(f"  {path}:") for t in listed if "open at the end" not in t)
        else:
            assert result.returncode == 0, said


def test_a_run_of_several_logs_imports_all_or_none(tmp_path: Path) -> None:
    good, bad, deep = tmp_path / "good.jsonl", tmp_path / "bad.jsonl", tmp_path / "deep.jsonl"
    good.write_bytes(b"\n".join(base_log()) + b"\n")
    # A malformed line in the second file: nothing of the first is imported either, and the
    # database files stay byte-identical.
    lines = base_log()
    MUTATIONS["a truncated line"].apply(lines)
    bad.write_bytes(b"\n".join(lines) + b"\n")
    db = seeded_db(tmp_path)
    result = import_refused_whole(bad, db, "--from", "dsh")
    assert result.returncode == 2
    before = files_of(db)
    refused = run_main("import", "--from", "dsh", str(good), str(bad), db=db)
    assert refused.returncode == 2 and refused.stderr.startswith(f"eventlog: error: {bad}, line 4")
    assert files_of(db) == before
    # A header the store refuses as metadata in the second file: the first file's session is
    # deleted again.
    deep.write_bytes(
        b"\n".join([HEADER[:-1] + b',"x":' + _nested(DEEP) + b"}", *base_log()[1:]]) + b"\n"
    )
    refused = run_main("import", "--from", "dsh", str(good), str(deep), db=db)
    assert refused.returncode == 2 and refused.stderr.startswith(f"eventlog: error: {deep}, line 1")
    assert "harness-run" not in run_main("sessions", db=db).stdout
