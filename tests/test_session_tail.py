"""A session reads its write-side state through one narrow tail owned by the store's writer:
it neither imports the writer (not even for type checking) nor exposes the writer's mutators."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import eventlog._session
from eventlog import open_store
from eventlog._errors import ConflictError
from eventlog._session import Session
from eventlog._vocabulary import TurnEnd, TurnStart

SESSION = Path(eventlog._session.__file__)


def _imported_modules(tree: ast.Module) -> list[str]:
    """Every module named by an import anywhere in the file (also inside ``if`` blocks)."""
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.append("." * node.level + (node.module or ""))
    return names


def test_session_py_imports_nothing_from_the_stores() -> None:
    # The writer imports the session's vocabulary, never the other way round: no cycle, not
    # even one hidden under TYPE_CHECKING.
    imported = _imported_modules(ast.parse(SESSION.read_text()))
    assert imported, "the parse found no imports at all"
    assert [m for m in imported if "stores" in m or "writer" in m] == []
    assert "TYPE_CHECKING" not in SESSION.read_text()


@pytest.mark.parametrize(
    "member", ["mark_durable", "fence", "chain_hash", "chain_version", "chain_binding"]
)
def test_the_writer_only_members_are_gone(member: str) -> None:
    assert not hasattr(Session, member)


@pytest.mark.anyio
async def test_watermarks_follow_the_writer_and_a_fence_blocks_appends(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 't.db'}"
    async with open_store(url) as store:
        session = await store.create(session_id="s")
        # A commit moves the head at once; the durable seq and the hash follow the writer.
        session.append("turn/start", TurnStart(turn=1))
        assert (session.head, session.durable, session.last_hash) == (0, -1, b"")
        await session.flush()
        assert session.durable == 0 and len(session.last_hash) > 0
        assert repr(session) == "<Session 's' head=0 durable=0>"
        # Only the writer fences: another store deletes and re-creates the session, so this
        # one's next round finds that its lease is gone.
        async with open_store(url) as other:
            await other.delete("s", force=True)
            await other.create(session_id="s")
        session.append("turn/end", TurnEnd(turn=1, reason="completed"))
        with pytest.raises(ConflictError):
            await session.flush()
        assert session.fenced and session.durable == 0
        with pytest.raises(ConflictError):
            session.append("turn/start", TurnStart(turn=2))
