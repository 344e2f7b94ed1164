"""The ``eventlog`` command reads sessions holding an app's own event types.

A type written without ``ignorable=True`` is not damage: without the app's registry the session
is in a state of its own (``unknown type X at seq N``), never ``corrupt``, and ``verify`` passes
(the hash chain is checked over every stored row); with ``--types module:attribute`` the
command reads it whole. The integrations' types are read by default.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import msgspec
import pytest

from agent.integrations.openai_agents import EventlogSession, openai_agents_types
from eventlog import EventTypes, TurnStart, open_store
from tests.cli_fixtures import cli, corrupt_event, url_of

APP = """
import msgspec
from eventlog import EventTypes

class Audit(msgspec.Struct, frozen=True, kw_only=True):
    who: str

def app_types():
    types = EventTypes()
    types.register("shop/audit", Audit)
    return types

def register(types):
    types.register("shop/audit", Audit)
    return types

TYPES = app_types()
NOT_A_REGISTRY = 3
"""


class Audit(msgspec.Struct, frozen=True, kw_only=True):
    who: str


async def write_app_session(path: Path) -> None:
    # An app with its own type, registered without ignorable=True, between core events.
    types = EventTypes()
    types.register("shop/audit", Audit)
    async with open_store(url_of(path), types=types) as store:
        session = await store.create(session_id="shop-1")
        session.append("turn/start", TurnStart(turn=1))
        session.append("shop/audit", Audit(who="ann"))
        await session.flush()


@pytest.fixture
def app_db(tmp_path: Path) -> Path:
    (tmp_path / "shopapp.py").write_text(APP)
    db = tmp_path / "shop.db"
    anyio.run(write_app_session, db)
    return db


def test_an_unknown_type_is_a_state_of_its_own(app_db: Path) -> None:
    # Listed as "unknown type", naming the type and seq; not corrupt.
    listed = json.loads(cli("sessions", "--json", db=app_db).stdout)["sessions"][0]
    assert listed["state"] == "unknown type"
    assert listed["error"]["message"].startswith("unknown type 'shop/audit' at seq 1")
    # verify passes: the chain holds over both events; it says what it could not decode.
    verified = cli("verify", "shop-1", db=app_db)
    assert verified.returncode == 0, verified.stderr
    assert "2 events, hash chain intact" in verified.stdout
    assert "unknown type 'shop/audit' at seq 1" in verified.stdout
    # audit reports the state and exits 0: nothing failed.
    audited = cli("audit", "shop-1", "--json", db=app_db)
    assert audited.returncode == 0, audited.stderr
    document = json.loads(audited.stdout)
    assert document["state"] == "unknown type"
    assert document["unknown"]["seq"] == 1
    # recover gives no verdict past it (the turn that looks open may close there): exit 0, as
    # sessions and audit, and it does not say "needs repair".
    recovered = cli("recover", "shop-1", db=app_db)
    assert recovered.returncode == 0, recovered.stderr
    assert "no diagnosis past seq 1: unknown type 'shop/audit'" in recovered.stdout
    assert "needs repair" not in recovered.stdout


def test_a_damaged_row_after_the_unknown_type_is_still_corrupt(app_db: Path) -> None:
    # The chain check covers the rows past the unknown event: damage there is found.
    corrupt_event(app_db, "shop-1", 1)
    listed = json.loads(cli("sessions", "--json", db=app_db).stdout)["sessions"][0]
    assert listed["state"] == "corrupt"
    assert cli("verify", "shop-1", db=app_db).returncode == 1


@pytest.mark.parametrize("spec", ["shopapp:TYPES", "shopapp:app_types", "shopapp:register"])
def test_types_loads_the_apps_registry(app_db: Path, spec: str) -> None:
    # An EventTypes, a function returning one, a function registering into one: all read.
    cwd = app_db.parent
    listed = json.loads(cli("sessions", "--json", "--types", spec, db=app_db, cwd=cwd).stdout)
    assert listed["sessions"][0]["state"] == "needs repair"  # a turn open, nobody writing
    shown = cli("show", "shop-1", "--types", spec, db=app_db, cwd=cwd)
    assert shown.returncode == 0, shown.stderr
    assert "shop/audit" in shown.stdout and '"who":"ann"' in shown.stdout


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("shopapp", "expected module:attribute"),
        ("nosuchmodule:TYPES", "cannot import 'nosuchmodule'"),
        ("shopapp:MISSING", "has no attribute 'MISSING'"),
        ("shopapp:NOT_A_REGISTRY", "expected an EventTypes"),
    ],
)
def test_a_bad_types_spec_is_a_usage_error(app_db: Path, spec: str, says: str) -> None:
    run = cli("sessions", "--types", spec, db=app_db, cwd=app_db.parent)
    assert run.returncode == 2
    assert f"--types {spec!r}" in run.stderr and says in run.stderr


async def write_agents_session(path: Path) -> None:
    async with open_store(url_of(path), types=openai_agents_types()) as store:
        session = await EventlogSession.open(store, "conversation-1")
        await session.add_items(
            [{"role": "user", "content": "hi"}, {"type": "reasoning", "id": "r"}]
        )
        await session.pop_item()
        await session.log.aclose()


def test_the_integrations_types_are_read_by_default(tmp_path: Path) -> None:
    # A session of the OpenAI Agents integration: its own types are known without --types.
    db = tmp_path / "agents.db"
    anyio.run(write_agents_session, db)
    listed = json.loads(cli("sessions", "--json", db=db).stdout)["sessions"][0]
    # Input the app added outside any run opens no turn: nothing was cut, nothing to repair.
    assert listed["state"] == "balanced" and listed["error"] is None
    shown = cli("show", "conversation-1", db=db)
    assert shown.returncode == 0, shown.stderr
    assert "openai_agents/pop" in shown.stdout
