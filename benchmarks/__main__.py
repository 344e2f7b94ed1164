"""``python -m benchmarks [SUITE ...] [--quick]``: print measured figures.

Suites: ``core`` (commit throughput), ``projections``, ``recovery``, ``sqlite``, ``postgres``,
``peers``, ``content`` (open with attachments), ``langgraph`` (EventlogSaver against SqliteSaver),
``langgraph-resume`` and ``openai_agents-resume`` (one long thread or session reopened, before
and now), ``approvals`` (an approval round trip against a plain call; ``approvals --pending``
over many sessions),
``audit`` (show and serve on long sessions), ``open`` (open against history length, from
snapshots), ``models`` (provider adapters over a loopback server), ``openai_agents``
(EventlogSession against the SDK's SQLiteSession), ``pydantic_ai`` (EventlogHistory's
per-run overhead against none), ``many`` (N concurrent sessions flushing at
the agent's checkpoints; several minutes).
Without a suite name every suite but ``peers`` and ``many`` runs (``make bench`` runs ``peers``
too).
Each figure is the median of several runs with its min–max spread.
"""

from __future__ import annotations

import argparse
import importlib
import platform
import sqlite3
import sys

SUITES = {
    "core": "benchmarks.core",
    "projections": "benchmarks.projections_bench",
    "recovery": "benchmarks.recovery_bench",
    "sqlite": "benchmarks.sqlite_bench",
    "postgres": "benchmarks.postgres_bench",
    "peers": "benchmarks.peers",
    "content": "benchmarks.content_bench",
    "langgraph": "benchmarks.langgraph_bench",
    "langgraph-resume": "benchmarks.langgraph_bench:resume",
    "langgraph-steps": "benchmarks.langgraph_steps",
    "audit": "benchmarks.audit_bench",
    "models": "benchmarks.models_bench",
    "openai_agents": "benchmarks.openai_agents_bench",
    "openai_agents-resume": "benchmarks.openai_agents_bench:resume",
    "open": "benchmarks.open_bench",
    "pydantic_ai": "benchmarks.pydantic_ai_bench",
    "many": "benchmarks.many_bench",
    "approvals": "benchmarks.approvals_bench",
}
DEFAULT = (
    "core",
    "projections",
    "recovery",
    "sqlite",
    "postgres",
    "content",
    "langgraph",
    "langgraph-resume",
    "models",
    "openai_agents",
    "openai_agents-resume",
    "open",
    "pydantic_ai",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("suites", nargs="*", metavar="SUITE", help=", ".join(SUITES))
    parser.add_argument("--quick", action="store_true", help="fewer and smaller runs")
    args = parser.parse_args(argv)
    unknown = [name for name in args.suites if name not in SUITES]
    if unknown:
        parser.error(f"unknown suite(s) {', '.join(unknown)}; choose from {', '.join(SUITES)}")
    print(
        f"# machine: {platform.machine()} {platform.processor() or ''}; Python "
        f"{platform.python_version()}; SQLite {sqlite3.sqlite_version}",
        flush=True,
    )
    for name in args.suites or DEFAULT:
        print(f"\n## {name}", flush=True)
        module_name, _, function = SUITES[name].partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            print(f"(suite {name!r} is not available: {exc})", flush=True)
            continue
        getattr(module, function or "main")(quick=args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
