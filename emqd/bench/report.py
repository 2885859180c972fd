"""Figures, their medians and ratios, the printed table and the JSON file.

Every figure is measured on both servers in the same run; the table shows
the median of the repeats for each, and the ratio emqd / redis of the
medians, judged against the issue's target where it has one. Ratios are
always emqd / redis, so for latency and memory lower is better.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from emqd.bench.scenarios import Sizes


@dataclass(frozen=True)
class Figure:
    scenario: str
    key: str
    label: str
    target: tuple[str, float] | None = None  # (">=" | "<=", bound)
    judge: str = "ratio"  # the bound applies to the ratio emqd/redis, or to "emqd"'s own figure
    min_load_jobs: int = 0  # judged only when the run was this big (load: the 1M)
    pure_target: tuple[str, float] | None = None  # the bound when emqd runs its pure-Python core


# Issue 10's targets (docs/PERFORMANCE.md): the cycle's bound depends on the core
# that runs (`emqd.core_build()`: the default install compiles it); memory is
# judged at the size with --big; p99s keep the earlier issue's bound.
FIGURES = [
    Figure("cycle", "cycle", "cycles/s (ADD+CLAIM+COMPLETE)", (">=", 2.0),
           pure_target=(">=", 1.5)),
    Figure("cycle", "cycle.cpu", "cycles per server CPU second"),
    Figure("latency", "add.p50", "ADD p50 us", ("<=", 1.0)),
    Figure("latency", "add.p99", "ADD p99 us", ("<=", 1.2)),
    Figure("latency", "claim.p50", "CLAIM p50 us", ("<=", 1.0)),
    Figure("latency", "claim.p99", "CLAIM p99 us", ("<=", 1.2)),
    Figure("latency", "complete.p50", "COMPLETE p50 us", ("<=", 1.0)),
    Figure("latency", "complete.p99", "COMPLETE p99 us", ("<=", 1.2)),
    Figure("fail", "fail", "FAILs/s (CLAIM+FAIL until dead)", (">=", 1.5)),
    Figure("sweep", "sweep", "leases recovered/s", (">=", 1.5)),
    Figure("memory", "memory", "RSS bytes per pending job", ("<=", 0.8)),
    *[Figure("memory", f"zset{n}.{kind}", f"zset of {n}: {what}", ("<=", 2.0))
      for n in (1, 4, 16, 128)
      for kind, what in (("usage", "MEMORY USAGE bytes"), ("rss", "RSS bytes a set"))],
    Figure("ping", "ping_inline", "PING inline req/s (-P 16)", (">=", 0.9)),
    Figure("ping", "ping_mbulk", "PING req/s (-P 16)", (">=", 0.9)),
    Figure("load", "load", "start-up s on an AOF of load_jobs", ("<=", 10.0), "emqd",
           min_load_jobs=1_000_000),
    Figure("durable", "always.cps", "cycles/s, appendfsync always"),
    Figure("durable", "everysec.cps", "cycles/s, appendfsync everysec", (">=", 1.5)),
    Figure("durable", "always", "always / no log (cycles/s)", (">=", 0.5), "emqd"),
    Figure("durable", "everysec", "everysec / no log (cycles/s)"),
    Figure("bigvalue", "bigvalue.peak", "peak RSS / value, one big HSET, log on",
           ("<=", 2.2), "emqd"),
    Figure("bigvalue", "bigvalue.after", "RSS after / value, one big HSET, log on"),
    # Cluster mode (emqd/bench/cluster.py): the "redis" column is Redis + Lua on one node.
    Figure("cluster", "acks0.cycle", "cluster: cycles/s, 3 primaries, no replica", (">=", 0.8)),
    Figure("cluster", "acks1.cycle", "cluster: cycles/s, a replica each, acks 1", (">=", 0.5)),
    Figure("cluster", "acks0.front.us", "cluster: front CPU us a job (no replica)"),
    Figure("cluster", "acks0.nodes.us", "cluster: nodes' CPU us a job (no replica)"),
    Figure("cluster", "acks0.total.us", "cluster: all CPU us a job (no replica)"),
    Figure("cluster", "acks1.total.us", "cluster: all CPU us a job (acks 1)"),
    *[Figure("cluster", f"{where}.{verb}.{q}", f"cluster: {verb.upper()} {q} us, {label}")
      for where, label in (("owner", "owner front"), ("other", "another front"))
      for verb in ("add", "claim", "complete") for q in ("p50", "p99")],
    # Issue 35: a queue of a million jobs served again within 15 s of its owner's SIGTERM.
    Figure("cluster", "takeover.s", "cluster: takeover s per 100,000 jobs", ("<=", 1.5), "emqd"),
    Figure("cluster", "add.owner", "cluster: pipelined ADDs/s, owner front"),
    Figure("cluster", "add.other", "cluster: pipelined ADDs/s, another front"),
    Figure("cluster", "add.other/owner", "cluster: pipelined ADD, other / owner", (">=", 0.5),
           "emqd"),
    Figure("cluster", "worker.owner", "cluster: emqd-worker jobs/s, given the owner"),
    Figure("cluster", "worker.other", "cluster: emqd-worker jobs/s, given another front"),
    Figure("cluster", "worker.other/owner", "cluster: emqd-worker given another / the owner",
           (">=", 0.9), "emqd"),
    # Issue 35's figures for 10,000 queues (emqd/bench/cluster.py `scale`): emqd only.
    Figure("cluster-scale", "create.s", "cluster: s to create the scale queues",
           ("<=", 20.0), "emqd"),
    Figure("cluster-scale", "idle.front.%", "cluster: idle CPU % of a front", ("<=", 5.0),
           "emqd"),
    Figure("cluster-scale", "idle.primary.%", "cluster: idle CPU % of a primary", ("<=", 5.0),
           "emqd"),
    Figure("cluster-scale", "claim.p50.ms", "cluster: CLAIM ms on an idle queue, p50"),
    Figure("cluster-scale", "claim.max.ms", "cluster: CLAIM ms on an idle queue, max",
           ("<=", 2000.0), "emqd"),
]
SCAN_COMMANDS = ("hscan", "zscan")


def figures_for(sizes: Sizes) -> list[Figure]:
    """FIGURES, with one scan row per command and collection size of this run: the
    server's us per HSCAN/ZSCAN COUNT 10 call, the same at every size (issue 15)."""
    return FIGURES + [Figure("scan", f"{command}.{size}",
                             f"{command.upper()} COUNT 10 us/call, {size:,} members")
                      for command in SCAN_COMMANDS for size in sizes.scan_sizes]


@dataclass
class Results:
    """Samples per (scenario, key) per server, and why a scenario could not run."""

    samples: dict[tuple[str, str], dict[str, list[float]]] = field(default_factory=dict)
    skipped: dict[tuple[str, str], str] = field(default_factory=dict)  # (scenario, server)

    def add(self, scenario: str, server: str, figures: dict[str, float]) -> None:
        for key, value in figures.items():
            self.samples.setdefault((scenario, key), {}).setdefault(server, []).append(value)

    def skip(self, scenario: str, server: str, reason: str) -> None:
        self.skipped[(scenario, server)] = reason

    def median(self, scenario: str, key: str, server: str) -> float | None:
        values = self.samples.get((scenario, key), {}).get(server)
        return statistics.median(values) if values else None

    def rows(self, scenarios: list[str], sizes: Sizes, core: str) -> list[dict[Any, Any]]:
        """The table's rows, judged against the targets for `core` ("mypyc" | "pure")."""
        rows = []
        load_jobs = sizes.load_jobs
        for fig in figures_for(sizes):
            if core == "pure" and fig.pure_target is not None:
                fig = replace(fig, target=fig.pure_target)
            if fig.scenario not in scenarios:
                continue
            emqd = self.median(fig.scenario, fig.key, "emqd")
            redis = self.median(fig.scenario, fig.key, "redis")
            ratio = emqd / redis if emqd is not None and redis else None
            met = None
            judged = ratio if fig.judge == "ratio" else emqd
            if judged is not None and fig.target is not None and load_jobs >= fig.min_load_jobs:
                op, bound = fig.target
                met = judged >= bound if op == ">=" else judged <= bound
            rows.append({
                "scenario": fig.scenario,
                "figure": fig.label,
                "emqd": emqd,
                "redis": redis,
                "ratio": ratio,
                "target": _target_text(fig),
                "met": met,
                "samples": self.samples.get((fig.scenario, fig.key), {}),
                "skipped": {server: reason for (scenario, server), reason
                            in self.skipped.items() if scenario == fig.scenario},
            })
        return rows


def _target_text(fig: Figure) -> str | None:
    if fig.target is None:
        return None
    text = f"{fig.target[0]} {fig.target[1]:g}"
    if fig.judge == "emqd":
        text = f"emqd {text}"
    if fig.min_load_jobs:
        text += f" at {fig.min_load_jobs:,}"
    return text


def _number(value: float | None, skipped: str | None) -> str:
    if value is None:
        return "n/a" if skipped is None else "n/a*"
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def table(rows: list[dict[Any, Any]]) -> str:
    head = ("scenario", "figure", "emqd", "redis+lua", "emqd/redis", "target", "")
    lines = [head]
    notes: dict[str, str] = {}
    for row in rows:
        for server, reason in row["skipped"].items():
            notes[f"{row['scenario']} on {server}"] = reason
        lines.append((
            row["scenario"],
            row["figure"],
            _number(row["emqd"], row["skipped"].get("emqd")),
            _number(row["redis"], row["skipped"].get("redis")),
            "-" if row["ratio"] is None else f"{row['ratio']:.2f}",
            row["target"] or "",
            {True: "met", False: "NOT MET", None: ""}[row["met"]],
        ))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    right = {2, 3, 4}
    out = []
    for line in lines:
        cells = [cell.rjust(w) if i in right else cell.ljust(w)
                 for i, (cell, w) in enumerate(zip(line, widths, strict=True))]
        out.append("  ".join(cells).rstrip())
    for where, reason in notes.items():
        out.append(f"* {where}: {reason}")
    return "\n".join(out)


def machine() -> dict[Any, Any]:
    """What the figures were measured on."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        redis = subprocess.run(["redis-server", "--version"], capture_output=True, text=True,
                               timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        redis = "not installed"
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "redis": redis,
    }


def write_json(path: str, rows: list[dict[Any, Any]], info: dict[Any, Any]) -> None:
    Path(path).write_text(json.dumps({**info, "rows": rows}, indent=2) + "\n")
