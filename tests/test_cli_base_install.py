"""The ``eventlog`` command on the base install: msgspec and anyio (and what anyio needs), no
extra. Every command's ``--help`` works; a command run without the extra it needs says which
in one line (exit 2), never a traceback; ``--json`` needs no extra.

The environment is a real virtualenv (``python -m venv --without-pip``) whose site-packages
holds only a ``.pth`` naming this checkout, a directory of links to the base packages installed
here, and the distribution's metadata as an install writes it (its name, version and console
script, from ``pyproject.toml``): built in a fraction of a second, once per test session, with
no network.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import tomllib
import venv
from pathlib import Path
from typing import Any

import pytest

from agent.cli._commands import COMMANDS
from eventlog import MissingExtraError, needs_extra

from .cli_fixtures import shared_runs_db, url_of

ROOT = Path(__file__).resolve().parents[1]
#: The checkout's packages, each put on the environments' path by itself.
PACKAGES = ("eventlog", "projections", "recovery", "agent")
#: The base install's dependencies (pyproject ``dependencies``) and theirs.
BASE = ("msgspec", "anyio", "idna", "typing_extensions")


def _metadata(target: Path) -> Path:
    """The distribution's metadata that an install writes and the command reads: its name and
    version (``eventlog --version``) and its console scripts (what ``python -m eventlog``
    runs), from ``pyproject.toml``."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    info = target / f"agent_eventlog-{project['version']}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n"
    )
    scripts = "".join(f"{name} = {target}\n" for name, target in project["scripts"].items())
    (info / "entry_points.txt").write_text(f"[console_scripts]\n{scripts}")
    return target


@pytest.fixture(scope="session")
def base_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv's python that sees this checkout installed and the base packages, nothing
    else."""
    return _environment(tmp_path_factory.mktemp("base-venv"), installed=True)


@pytest.fixture(scope="session")
def checkout_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same, with the checkout only put on ``sys.path``: no distribution is installed."""
    return _environment(tmp_path_factory.mktemp("checkout-venv"), installed=False)


def _environment(home: Path, *, installed: bool) -> Path:
    venv.EnvBuilder(with_pip=False, symlinks=True).create(home / "env")
    python = home / "env" / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    deps = home / "deps"
    deps.mkdir()
    for name in BASE:
        module = importlib.import_module(name)
        source = Path(module.__file__ or "")
        source = source.parent if source.name == "__init__.py" else source
        (deps / source.name).symlink_to(source)
    # The packages, not the checkout's root: an editable install leaves its metadata
    # (agent_eventlog.egg-info) there, which would make a bare checkout look installed.
    for package in PACKAGES:
        (deps / package).symlink_to(ROOT / package)
    paths = [deps, *([_metadata(home / "meta")] if installed else [])]
    (site / "eventlog-checkout.pth").write_text("".join(f"{path}\n" for path in paths))
    return python


def run(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # Run from the environment's home, not the checkout: `python -m` puts the working
    # directory first on sys.path, which would again show the checkout's metadata.
    home = python.parents[2]
    return subprocess.run(
        [str(python), *args], capture_output=True, text=True, timeout=60, check=False, cwd=home
    )


#: One top-level module of each extra.
EXTRA_MODULES = (
    "rich",
    "sse_starlette",
    "opentelemetry",
    "asyncpg",
    "langgraph",
    "agents",
    "pydantic_ai",
    "hypothesis",
    "pytest",
    "openai",
    "anthropic",
)


def test_the_environment_really_lacks_every_extra(base_python: Path) -> None:
    # The fault this file is about must be present: no rich, starlette, opentelemetry...
    probe = "import importlib.util as u; print([m for m in %r if u.find_spec(m)])"
    extras = (*EXTRA_MODULES, "starlette", "jinja2", "uvicorn", "langchain_core")
    assert run(base_python, "-c", probe % (extras,)).stdout.strip() == "[]"
    assert run(base_python, "-c", "import eventlog, msgspec, anyio").returncode == 0


def test_every_help_works_on_the_base_install(base_python: Path) -> None:
    # `eventlog --help`, through the module the console script runs.
    top = run(base_python, "-m", "eventlog", "--help")
    assert top.returncode == 0, top.stderr
    assert "Traceback" not in top.stderr and "exit codes" in top.stdout
    # Every subcommand's --help, each in a fresh parser, in one process.
    names = [command.name for command in COMMANDS]
    script = (
        "import contextlib, io, json, sys\n"
        "from agent.cli import main\n"
        "codes = {}\n"
        f"for name in {names!r}:\n"
        "    out = io.StringIO()\n"
        "    try:\n"
        "        with contextlib.redirect_stdout(out):\n"
        "            main([name, '--help'])\n"
        "    except SystemExit as exc:\n"
        "        codes[name] = [exc.code, 'usage:' in out.getvalue()]\n"
        "print(json.dumps(codes))\n"
    )
    result = run(base_python, "-c", script)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert json.loads(result.stdout) == {name: [0, True] for name in names}


def test_python_m_eventlog_runs_the_installed_console_script(
    base_python: Path, checkout_python: Path
) -> None:
    # `python -m eventlog` runs what the distribution declares as the `eventlog` script: its
    # --version is the installed distribution's.
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    shown = run(base_python, "-m", "eventlog", "--version")
    assert (shown.returncode, shown.stdout, shown.stderr) == (0, f"eventlog {version}\n", "")
    # A checkout only put on sys.path declares no script: one line saying what to install,
    # exit 2, whatever the arguments.
    for args in (("--version",), ("--help",), ("sessions",)):
        bare = run(checkout_python, "-m", "eventlog", *args)
        assert (bare.returncode, bare.stdout) == (2, ""), bare.stderr
        assert bare.stderr == (
            "python -m eventlog: the 'eventlog' console script of agent-eventlog is not "
            "installed: pip install agent-eventlog (in a checkout: pip install -e .)\n"
        )
    # Everything else works there as installed: the library, and the command by its module.
    assert run(checkout_python, "-m", "agent.cli", "--help").returncode == 0


#: Commands that need an extra, and which.
NEEDS = [
    (("sessions",), "cli"),
    (("audit", "balanced"), "cli"),
    (("replay", "balanced"), "cli"),
    (("follow", "balanced", "--count", "1"), "cli"),
    (("serve", "--port", "0"), "web"),
    (("export", "balanced", "--format", "html"), "web"),
    (("export", "balanced", "--format", "otlp"), "otel"),
    # A PostgreSQL store (the later --db wins): asyncpg's ModuleNotFoundError was a traceback.
    (("sessions", "--json", "--db", "postgresql://postgres@127.0.0.1:5432/eventlog"), "postgres"),
]
#: Commands that need none: plain lines, and every --json.
PLAIN = [
    ("sessions", "--json"),
    ("show", "balanced"),
    ("verify", "balanced"),
    ("recover", "balanced"),
    ("audit", "balanced", "--json"),
    ("replay", "balanced", "--json"),
    ("follow", "balanced", "--count", "1", "--json"),
]


def run_in_process(python: Path, db: Path, commands: list[tuple[str, ...]]) -> list[Any]:
    """``[code, stdout, stderr]`` of ``main()`` for each command, in one base-install process
    (each with fresh streams, as a separate run would have)."""
    script = (
        "import contextlib, io, json, sys\n"
        "from agent.cli import main\n"
        "found = []\n"
        f"for args in {commands!r}:\n"
        "    out, err = io.StringIO(), io.StringIO()\n"
        "    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):\n"
        f"        code = main(['--db', {url_of(db)!r}, *args])\n"
        "    found.append([code, out.getvalue(), err.getvalue()])\n"
        "print(json.dumps(found))\n"
    )
    result = run(python, "-c", script)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    found: list[Any] = json.loads(result.stdout)
    return found


def test_a_command_needing_an_extra_says_which_in_one_line(
    base_python: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    db = shared_runs_db(tmp_path_factory)
    found = run_in_process(base_python, db, [args for args, _ in NEEDS])
    for (args, extra), (code, out, err) in zip(NEEDS, found, strict=True):
        assert code == 2, (args, err)
        assert err.count("\n") == 1, (args, err)  # one line
        assert f"needs the {extra} extra: pip install 'agent-eventlog[{extra}]'" in err, (args, err)
        assert out == "", args  # said before anything was printed


def test_json_and_plain_commands_need_no_extra(
    base_python: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    db = shared_runs_db(tmp_path_factory)
    found = run_in_process(base_python, db, PLAIN)
    for args, (code, out, err) in zip(PLAIN, found, strict=True):
        # 1 for sessions: the fixture holds damaged sessions (one rule for every command).
        assert code == (1 if args[0] == "sessions" else 0), (args, err)
        assert out and "needs the" not in err, (args, err)
    assert {s["id"] for s in json.loads(found[0][1])["sessions"]} >= {"balanced", "crashed"}


#: What a newcomer's code touches first, per extra: each must say which extra to install.
LIBRARY_NEEDS = [
    (
        "import anyio\nfrom eventlog import open_store\nasync def main():\n"
        "    async with open_store('postgresql://u:secret@127.0.0.1:1/app'):\n        pass\n"
        "anyio.run(main)",
        "postgres",
        "a postgresql:// store",
    ),
    ("from agent.otel import TraceObserver", "otel", "agent.otel"),
    ("import agent.web", "web", "agent.web"),
    (
        "from agent.integrations.langgraph import EventlogSaver",
        "langgraph",
        "agent.integrations.langgraph.EventlogSaver",
    ),
    (
        "from agent.integrations.openai_agents import EventlogHooks",
        "openai-agents",
        "agent.integrations.openai_agents.EventlogHooks",
    ),
    (
        "from agent.integrations.pydantic_ai import EventlogHistory",
        "pydantic-ai",
        "agent.integrations.pydantic_ai.EventlogHistory",
    ),
    ("from recovery.testing import agent_runs", "testing", "recovery.testing"),
    ("from eventlog.testing import StoreConformance", "testing", "eventlog.testing"),
    (
        "from agent.models import OpenAIChat\nOpenAIChat('m', api_key='k')",
        "openai",
        "agent.models.OpenAIChat",
    ),
    (
        "from agent.models import AnthropicMessages\nAnthropicMessages('m', api_key='k')",
        "anthropic",
        "agent.models.AnthropicMessages",
    ),
]


def test_library_code_needing_an_extra_says_which(base_python: Path) -> None:
    # Each snippet, in a fresh base-install process, raises MissingExtraError (an ImportError
    # too, so `except ImportError` keeps working) whose one line is the pip command.
    for code, extra, what in LIBRARY_NEEDS:
        script = (
            "import sys\n"
            "from eventlog import MissingExtraError\n"
            f"try:\n    exec({code!r})\n"
            "except MissingExtraError as exc:\n"
            "    assert isinstance(exc, ImportError) and exc.extra and exc.name\n"
            "    print(exc)\n"
            "else:\n    print('no error')\n"
        )
        result = run(base_python, "-c", script)
        assert result.returncode == 0 and "Traceback" not in result.stderr, (code, result.stderr)
        said = result.stdout.strip()
        assert said.startswith(
            f"{what} needs the {extra} extra: pip install 'agent-eventlog[{extra}]' (No module "
        ), (code, said)
        assert "secret" not in said  # a URL's password is never repeated


def test_a_postgresql_url_without_the_extra_is_one_line(base_python: Path) -> None:
    # The command on a postgresql:// store: no traceback, exit 2, the pip line; under --json
    # the same as one JSON object.
    url = "postgresql://postgres@127.0.0.1:1/app"
    plain = run(base_python, "-m", "eventlog", "--db", url, "verify", "--all")
    assert plain.returncode == 2 and plain.stdout == "", plain.stderr
    assert plain.stderr == (
        "eventlog: error: a postgresql:// store needs the postgres extra: "
        "pip install 'agent-eventlog[postgres]' (No module named 'asyncpg')\n"
    )
    as_json = run(base_python, "-m", "eventlog", "--db", url, "sessions", "--json")
    assert as_json.returncode == 2
    error = json.loads(as_json.stderr)["error"]
    assert error["type"] == "MissingExtraError" and error["exit"] == 2
    assert "pip install 'agent-eventlog[postgres]'" in error["message"]


def test_a_module_missing_for_another_reason_is_not_blamed_on_an_extra() -> None:
    # A module that is not the extra's (a broken install, a typo) passes unchanged: telling
    # the user to install an extra they have would send them the wrong way.
    with pytest.raises(ModuleNotFoundError) as raised, needs_extra("otel", "x", "opentelemetry"):
        import eventlog_no_such_module  # type: ignore[import-not-found]  # noqa: F401
    assert not isinstance(raised.value, MissingExtraError)
    # The extra's own module, missing, is the extra's error, chained to the import's.
    with pytest.raises(MissingExtraError) as named, needs_extra("otel", "x", "eventlog_no"):
        import eventlog_no.such  # type: ignore[import-not-found]  # noqa: F401
    assert str(named.value) == (
        "x needs the otel extra: pip install 'agent-eventlog[otel]' (No module named 'eventlog_no')"
    )
    assert isinstance(named.value.__cause__, ModuleNotFoundError)
