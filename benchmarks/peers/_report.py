"""The peers table: printed, and written as JSON, Markdown and a PNG chart.

Figures per peer and session length T: workload events per second (median, min–max), the ratio
of the median to raw sqlite3's median at the same T, the reload time (median, min–max) and the
database bytes per turn (median). Below the table, the two verdicts the benchmark exists for:
eventlog's durable throughput against the best peer at T = 1,000, and its reload time against
every peer whose load path validates what it reads.
"""

from __future__ import annotations

import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from ._common import Peer

__all__ = ("RESULTS", "Meta", "Outcome", "PeerInfo", "load_average", "report")

RESULTS = Path(__file__).resolve().parent.parent / "results"
RAW = "raw sqlite3"
OURS = "eventlog (flush per turn)"
OURS_BACKGROUND = "eventlog (background writer)"
#: The rows that are not peers to beat: the floor and eventlog's own.
NOT_CONTENDERS = (RAW, OURS, OURS_BACKGROUND)
VERDICT_TURNS = 1_000
TARGET_RATIO = 1.5


@dataclass(frozen=True)
class PeerInfo:
    """A peer as reported: its package version, durability and what its load validates."""

    name: str
    package: str = ""
    version: str = ""
    durability: str = ""
    validates: str = ""
    validating: bool = False
    error: str = ""

    @classmethod
    def of(cls, peer: Peer) -> PeerInfo:
        return cls(
            name=peer.name,
            package=peer.package,
            version=_version(peer.package),
            durability=peer.durability,
            validates=peer.validates,
            validating=peer.validating,
        )

    @classmethod
    def missing(cls, name: str, error: str) -> PeerInfo:
        return cls(name=name, error=error)


@dataclass(frozen=True)
class Meta:
    """Where and how the figures were measured."""

    date: str
    machine: str
    cpus: int
    python: str
    sqlite: str
    platform: str
    filesystem: str
    quick: bool
    lengths: list[tuple[int, int]]
    seconds: float
    load_average: tuple[float, float]
    commit: str = "?"

    @classmethod
    def now(
        cls,
        *,
        quick: bool,
        lengths: list[tuple[int, int]],
        seconds: float,
        scratch: str,
        load_at_start: float,
    ) -> Meta:
        return cls(
            date=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            machine=f"{platform.machine()} {_cpu_model()}".strip(),
            cpus=os.cpu_count() or 0,
            python=platform.python_version(),
            sqlite=sqlite3.sqlite_version,
            platform=platform.platform(),
            filesystem=_filesystem(scratch),
            quick=quick,
            lengths=lengths,
            seconds=round(seconds, 1),
            load_average=(round(load_at_start, 2), round(load_average(), 2)),
            commit=_commit(),
        )


@dataclass
class Outcome:
    """The runs of one peer at one session length."""

    peer: str
    turns: int
    sessions: int = 1
    events_per_s: list[float] = field(default_factory=list)
    write_cpu_per_turn_s: list[float] = field(default_factory=list)
    reload_s: list[float] = field(default_factory=list)
    reload_cpu_s: list[float] = field(default_factory=list)
    bytes_per_turn: list[float] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    note: str = ""
    ratio_to_raw: float | None = None

    @property
    def label(self) -> str:
        """``T`` for one session, ``N×T`` for N sessions written at once."""
        return f"{self.turns:,}" if self.sessions == 1 else f"{self.sessions}×{self.turns:,}"

    def median(self, name: str) -> float | None:
        values: list[float] = getattr(self, name)
        return statistics.median(values) if values else None

    def summary(self, name: str) -> dict[str, float] | None:
        values: list[float] = getattr(self, name)
        if not values:
            return None
        return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def report(
    meta: Meta, peers: list[PeerInfo], outcomes: list[Outcome], directory: Path = RESULTS
) -> None:
    """Print the table and verdicts; write ``peers[-quick].json``, ``.md`` and ``.png``."""
    _ratios(outcomes)
    _projections(outcomes)
    lines = _table(meta, peers, outcomes)
    verdicts = _verdicts(peers, outcomes)
    print("\n".join([*lines, "", *verdicts]), flush=True)
    stem = "peers-quick" if meta.quick else "peers"
    directory.mkdir(exist_ok=True)
    document = {
        "meta": asdict(meta),
        "peers": [asdict(p) for p in peers],
        "results": [_as_json(o) for o in outcomes],
        "verdicts": verdicts,
    }
    (directory / f"{stem}.json").write_text(json.dumps(document, indent=2) + "\n")
    (directory / f"{stem}.md").write_text(_markdown(meta, peers, outcomes, verdicts))
    chart = _chart(outcomes, directory / f"{stem}.png", meta)
    print(f"\nwrote {directory / stem}.json, .md{', .png' if chart else ''}", flush=True)
    if not chart:
        print("(no chart: matplotlib is not installed; install the bench extra)", flush=True)


def _ratios(outcomes: list[Outcome]) -> None:
    raw = {o.label: o.median("events_per_s") for o in outcomes if o.peer == RAW}
    for outcome in outcomes:
        mine, floor = outcome.median("events_per_s"), raw.get(outcome.label)
        if mine is not None and floor:
            outcome.ratio_to_raw = mine / floor


def _projections(outcomes: list[Outcome]) -> None:
    """For a length a peer could not write, project its bytes per turn from the longest it did.

    A peer whose every checkpoint holds the whole history stores bytes per turn proportional to
    T, so the projection scales the measured figure linearly.
    """
    for outcome in outcomes:
        if outcome.bytes_per_turn or not outcome.note or outcome.sessions != 1:
            continue
        written = [
            o
            for o in outcomes
            if o.peer == outcome.peer
            and o.sessions == 1
            and o.bytes_per_turn
            and o.turns < outcome.turns
        ]
        if written:
            base = max(written, key=lambda o: o.turns)
            per_turn = (base.median("bytes_per_turn") or 0.0) * outcome.turns / base.turns
            total = per_turn * outcome.turns
            outcome.note += f"; projected {per_turn:,.0f} B/turn ({total / 2**30:,.1f} GiB)"
            if outcome.reload_s:
                outcome.note += ", reload measured on the final checkpoint alone"


def _fmt(value: float | None, spec: str = ",.0f") -> str:
    return "—" if value is None else format(value, spec)


def _spread(outcome: Outcome, name: str, scale: float = 1.0, spec: str = ",.0f") -> str:
    summary = outcome.summary(name)
    if summary is None:
        return "—"
    return f"{format(summary['min'] * scale, spec)}–{format(summary['max'] * scale, spec)}"


def _rows(outcomes: list[Outcome]) -> list[list[str]]:
    rows = []
    for o in outcomes:
        reload_s = o.median("reload_s")
        reload_cpu = o.median("reload_cpu_s")
        write_cpu = o.median("write_cpu_per_turn_s")
        rows.append(
            [
                o.label,
                o.peer,
                _fmt(o.median("events_per_s")),
                _spread(o, "events_per_s"),
                _fmt(o.ratio_to_raw, ".2f"),
                _fmt(None if write_cpu is None else write_cpu * 1e6),
                _fmt(None if reload_s is None else reload_s * 1000, ",.1f"),
                _spread(o, "reload_s", 1000, ",.1f"),
                _fmt(None if reload_cpu is None else reload_cpu * 1000, ",.1f"),
                _fmt(o.median("bytes_per_turn")),
                str(len(o.events_per_s) or len(o.reload_s)),
                o.error or o.note,
            ]
        )
    return rows


_HEADERS = [
    "T",
    "peer",
    "events/s",
    "min–max",
    "× raw",
    "CPU µs/turn",
    "reload ms",
    "min–max",
    "reload CPU ms",
    "bytes/turn",
    "runs",
    "note",
]


def _table(meta: Meta, peers: list[PeerInfo], outcomes: list[Outcome]) -> list[str]:
    rows = _rows(outcomes)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(_HEADERS[:-1])]
    right = {0, 2, 4, 5, 6, 8, 9, 10}

    def line(cells: list[str]) -> str:
        parts = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells[:-1], widths, strict=True))
        ]
        return "  ".join([*parts, cells[-1]]).rstrip()

    out = [*_header(meta), "", line(_HEADERS), line(["-" * w for w in widths] + ["----"])]
    previous = None
    for row in rows:
        if previous is not None and row[0] != previous:
            out.append("")
        previous = row[0]
        out.append(line(row))
    out.append("")
    out.append("peers (durability; what the load path validates):")
    for p in peers:
        if p.error:
            out.append(f"  {p.name}: {p.error}")
        else:
            out.append(
                f"  {p.name} [{p.package} {p.version}]: {p.durability}; validates {p.validates}"
            )
    return out


def _header(meta: Meta) -> list[str]:
    runs = ", ".join(f"T={t:,}: {r} runs" for t, r in meta.lengths)
    fewer = [t for t, r in meta.lengths if r < 5]
    out = [
        f"measured {meta.date} on {meta.machine}, {meta.cpus} CPUs, {meta.platform}",
        f"Python {meta.python}, SQLite {meta.sqlite}, database on {meta.filesystem}; eventlog "
        f"commit {meta.commit}",
        f"{runs}; {'--quick' if meta.quick else 'full run'}, {meta.seconds:,.0f} s; 1-minute "
        f"load average {meta.load_average[0]:.1f} at start, {meta.load_average[1]:.1f} at end "
        f"(other work on the machine inflates wall times; CPU columns are this process only)",
        "durability: every peer fsyncs each turn (WAL, synchronous=FULL) except the eventlog "
        "background-writer row (durable within ~10 ms of commit, one flush at the end)",
        "events/s counts 18 workload events per turn for every peer; reload = one session, warm "
        "page cache, the database already open; N×T rows: N sessions of T turns written at once "
        "into one file (events/s is their total)",
    ]
    if fewer and not meta.quick:
        out.append(
            f"fewer than 5 runs at T={', '.join(f'{t:,}' for t in fewer)} to keep the full run "
            "within its time budget"
        )
    return out


def _verdicts(peers: list[PeerInfo], outcomes: list[Outcome]) -> list[str]:
    by_name = {p.name: p for p in peers}
    concurrent = [o for o in outcomes if o.sessions != 1]
    outcomes = [o for o in outcomes if o.sessions == 1]
    ours = {o.turns: o for o in outcomes if o.peer == OURS}
    background = {o.turns: o for o in outcomes if o.peer == OURS_BACKGROUND}
    others = [o for o in outcomes if o.peer not in NOT_CONTENDERS]
    out = []
    mine = ours.get(VERDICT_TURNS)
    contenders = [o for o in others if o.turns == VERDICT_TURNS and o.median("events_per_s")]
    if mine is None:
        out.append(f"verdict throughput @T={VERDICT_TURNS:,}: not measured in this run")
    elif mine.median("events_per_s") is None:
        out.append(f"verdict throughput @T={VERDICT_TURNS:,}: eventlog did not run")
    elif not contenders:
        out.append(f"verdict throughput @T={VERDICT_TURNS:,}: no peer ran at this length")
    else:
        best = _fastest(contenders)
        ratio = _throughput_ratio(mine, best)
        ok = "MET" if ratio >= TARGET_RATIO else "NOT MET"
        out.append(
            f"verdict throughput @T={VERDICT_TURNS:,}: eventlog flush-per-turn is {ratio:.2f}× "
            f"the best peer ({best.peer}); target ≥{TARGET_RATIO}× {ok}"
        )
        bg = background.get(VERDICT_TURNS)
        if bg is not None and bg.median("events_per_s"):
            bg_ratio = _throughput_ratio(bg, best)
            out.append(
                f"  (background writer: {bg_ratio:.2f}× the best peer, with the weaker "
                "durable-within-10-ms guarantee)"
            )
    out += _concurrent_verdict(concurrent)
    for turns, mine in sorted(ours.items()):
        reload_s, reload_cpu = mine.median("reload_s"), mine.median("reload_cpu_s")
        if reload_s is None or reload_cpu is None:
            out.append(f"verdict reload @T={turns:,}: eventlog did not reload")
            continue
        validating = [
            o
            for o in others
            if o.turns == turns and by_name[o.peer].validating and o.median("reload_s")
        ]
        names = ", ".join(
            f"{o.peer} {1000 * (o.median('reload_s') or 0.0):,.1f} ms "
            f"(CPU {1000 * (o.median('reload_cpu_s') or 0.0):,.1f})"
            for o in validating
        )
        wall_ok = all((o.median("reload_s") or 0.0) > reload_s for o in validating)
        cpu_ok = all((o.median("reload_cpu_s") or 0.0) > reload_cpu for o in validating)
        verdict = (
            "no validating peer ran"
            if not validating
            else f"wall {'MET' if wall_ok else 'NOT MET'}, CPU {'MET' if cpu_ok else 'NOT MET'}"
        )
        out.append(
            f"verdict reload @T={turns:,}: eventlog {1000 * reload_s:,.1f} ms "
            f"(CPU {1000 * reload_cpu:,.1f}) vs validating peers: {names or 'none'}; "
            f"below every one: {verdict}"
        )
    return out


def _concurrent_verdict(outcomes: list[Outcome]) -> list[str]:
    mine = next((o for o in outcomes if o.peer == OURS and o.median("events_per_s")), None)
    contenders = [o for o in outcomes if o.peer not in NOT_CONTENDERS and o.median("events_per_s")]
    if mine is None or not contenders:
        return []
    best = _fastest(contenders)
    return [
        f"throughput with {mine.label} turns written at once: eventlog flush-per-turn is "
        f"{_throughput_ratio(mine, best):.2f}× the best peer ({best.peer}; group commit shares "
        "each fsync)"
    ]


def _fastest(outcomes: list[Outcome]) -> Outcome:
    """The outcome with the highest median events per second."""
    return max(outcomes, key=lambda o: o.median("events_per_s") or 0.0)


def _throughput_ratio(mine: Outcome, best: Outcome) -> float:
    """``mine``'s median events per second over ``best``'s."""
    return (mine.median("events_per_s") or 0.0) / (best.median("events_per_s") or 1.0)


def _as_json(o: Outcome) -> dict[str, Any]:
    return {
        "peer": o.peer,
        "turns": o.turns,
        "sessions": o.sessions,
        "events_per_s": o.summary("events_per_s"),
        "events_per_s_runs": o.events_per_s,
        "ratio_to_raw": o.ratio_to_raw,
        "write_cpu_per_turn_s": o.summary("write_cpu_per_turn_s"),
        "reload_s": o.summary("reload_s"),
        "reload_s_runs": o.reload_s,
        "reload_cpu_s": o.summary("reload_cpu_s"),
        "reload_cpu_s_runs": o.reload_cpu_s,
        "bytes_per_turn": o.median("bytes_per_turn"),
        "settings": o.settings,
        "error": o.error,
        "note": o.note,
    }


def _markdown(
    meta: Meta, peers: list[PeerInfo], outcomes: list[Outcome], verdicts: list[str]
) -> str:
    rows = _rows(outcomes)
    out = [f"<!-- written by `python -m benchmarks peers`{' --quick' if meta.quick else ''} -->"]
    out += [f"- {line}" for line in _header(meta)]
    out += ["", "| " + " | ".join(_HEADERS) + " |", "|" + "---|" * len(_HEADERS)]
    out += ["| " + " | ".join(cell.replace("|", "/") for cell in row) + " |" for row in rows]
    out += ["", "| peer | version | durability | load validates |", "|---|---|---|---|"]
    for p in peers:
        if p.error:
            out.append(f"| {p.name} | — | {p.error} | — |")
        else:
            out.append(f"| {p.name} | {p.package} {p.version} | {p.durability} | {p.validates} |")
    out += ["", *[f"- {v}" for v in verdicts], ""]
    return "\n".join(out)


def _chart(outcomes: list[Outcome], path: Path, meta: Meta) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import NullFormatter
    except ImportError:
        return False
    panels = (
        ("events_per_s", "workload events/s (durable)", 1.0),
        ("bytes_per_turn", "database bytes per turn", 1.0),
        ("reload_s", "reload one session (ms)", 1000.0),
    )
    figure, axes = plt.subplots(1, 3, figsize=(16, 5.2))
    outcomes = [o for o in outcomes if o.sessions == 1]
    names = list(dict.fromkeys(o.peer for o in outcomes))
    for axis, (attr, title, scale) in zip(axes, panels, strict=True):
        for name in names:
            points = [o for o in outcomes if o.peer == name and getattr(o, attr)]
            if not points:
                continue
            xs = [o.turns for o in points]
            mids = [(o.median(attr) or 0.0) * scale for o in points]
            lows = [m - min(getattr(o, attr)) * scale for o, m in zip(points, mids, strict=True)]
            highs = [max(getattr(o, attr)) * scale - m for o, m in zip(points, mids, strict=True)]
            style = "-" if name.startswith("eventlog") else "--"
            axis.errorbar(xs, mids, yerr=[lows, highs], fmt=style + "o", capsize=3, label=name)
        axis.set_xscale("log")
        axis.set_yscale("log")
        lengths = sorted({o.turns for o in outcomes})
        axis.set_xticks(lengths, [f"{t:,}" for t in lengths])
        axis.xaxis.set_minor_formatter(NullFormatter())
        axis.set_xlabel("session length T (turns)")
        axis.set_title(title)
        axis.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    figure.suptitle(
        f"eventlog vs peers on SQLite {meta.sqlite}, Python {meta.python}, {meta.machine}, "
        f"{meta.cpus} CPUs; WAL + synchronous=FULL; median with min–max",
        fontsize=10,
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def load_average() -> float:
    """The 1-minute load average (0.0 where the platform has none)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return 0.0


def _commit() -> str:
    """The eventlog commit measured: ``BENCH_COMMIT``, else ``git describe`` of this checkout."""
    if os.environ.get("BENCH_COMMIT"):
        return os.environ["BENCH_COMMIT"]
    try:
        described = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return "?"
    return described.stdout.strip() or "?"


def _version(package: str) -> str:
    if package == "sqlite3":
        return sqlite3.sqlite_version
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "?"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _filesystem(directory: str) -> str:
    """The filesystem type and device holding ``directory`` (from /proc/mounts on Linux)."""
    best = ("", "?", "?")
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return sys.platform
    target = os.path.realpath(directory)
    for line in mounts:
        device, mount, kind, *_ = line.split()
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) > len(best[0]):
            best = (mount, kind, device)
    return f"{best[1]} ({best[2]})"
