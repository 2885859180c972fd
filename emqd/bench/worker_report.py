"""The `worker` scenario's table: each system's drain rate and CPU a job, side by side.

Each row: the drain rate, the worker's CPU a job (its whole process tree) and the
server's over the same window (emqd's, or the redis-server's). Rows are
emqd-worker's runs (async and sync handlers, each concurrency, one process and
`--processes 2`), then BullMQ's and Dramatiq's at each concurrency, all medians
of the same run's repeats. The ratios and the targets are issue 36's:

- async, concurrency 50: >= 2.5x BullMQ's Worker at the same concurrency, and
  <= 35 us of worker CPU a job;
- sync, concurrency 50: >= 1.7x BullMQ's and >= 1.5x Dramatiq's (`--threads 50`);
- both at concurrency 500 within 20% of their concurrency-50 rate;
- `--processes 2` >= 1.5x one process's rate.
"""

from __future__ import annotations

from typing import Any

from emqd.bench.report import Results

SYSTEMS = (("emqd", "emqd-worker"), ("bullmq", "BullMQ Worker"), ("dramatiq", "Dramatiq"))
KEY_AT = 50  # the concurrency the ratios are taken at


def _label(key: str) -> str:
    parts = key.split(".")
    name = dict(SYSTEMS)[parts[0]]
    if parts[0] == "emqd":
        text = f"{name} {parts[1]} def" if parts[1] == "sync" else f"{name} async def"
        text += f", concurrency {parts[2]}"
        return text + (f", --processes {parts[3][1:]}" if len(parts) > 3 else "")
    what = "--threads" if parts[0] == "dramatiq" else "concurrency"
    return f"{name}, {what} {parts[1]}"


def _judge(key: str, rate: float, cpu: float | None,
           median: Any) -> tuple[str, str, str, bool | None]:
    """vs BullMQ, vs Dramatiq, the targets' text and whether they are met, of one row
    (only emqd's rows are judged)."""
    parts = key.split(".")
    if parts[0] != "emqd":
        return "", "", "", None
    kind, concurrency = parts[1], int(parts[2])
    bull = median("bullmq", f"bullmq.{concurrency}")
    dram = median("dramatiq", f"dramatiq.{concurrency}")
    versus_bull = f"{rate / bull:.2f}x" if bull else "-"
    versus_dram = f"{rate / dram:.2f}x" if dram else "-"
    checks: list[tuple[str, bool | None]] = []
    if len(parts) > 3:
        one = median("emqd", f"emqd.{kind}.{concurrency}")
        checks.append((">= 1.5x one process", rate / one >= 1.5 if one else None))
    elif concurrency == KEY_AT:
        need_bull = 2.5 if kind == "async" else 1.7
        checks.append((f">= {need_bull}x BullMQ", rate / bull >= need_bull if bull else None))
        if kind == "async":
            checks.append(("<= 35 us", cpu <= 35 if cpu is not None else None))
        else:
            checks.append((">= 1.5x Dramatiq", rate / dram >= 1.5 if dram else None))
    elif concurrency > KEY_AT:
        at_key = median("emqd", f"emqd.{kind}.{KEY_AT}")
        checks.append((f"within 20% of {KEY_AT}",
                       rate >= 0.8 * at_key if at_key else None))
    text = ", ".join(what for what, _ in checks)
    verdicts = [ok for _, ok in checks]
    met = None if not checks or None in verdicts else all(verdicts)
    return versus_bull, versus_dram, text, met


def rows(results: Results) -> list[dict[str, Any]]:
    def median(system: str, key: str) -> float | None:
        return results.median("worker", key, system)

    found = []
    for system, _ in SYSTEMS:
        keys = [key for (scenario, key), by in results.samples.items()
                if scenario == "worker" and system in by
                and not key.endswith((".cpu", ".server"))]
        for key in keys:
            rate = median(system, key)
            if rate is None:
                continue
            cpu = median(system, key + ".cpu")
            server = median(system, key + ".server")
            versus_bull, versus_dram, target, met = _judge(key, rate, cpu, median)
            found.append({"key": key, "figure": _label(key), "rate": rate, "cpu_us": cpu,
                          "server_cpu_us": server,
                          "vs_bullmq": versus_bull, "vs_dramatiq": versus_dram,
                          "target": target, "met": met,
                          "samples": {"rate": results.samples[("worker", key)][system],
                                      "cpu_us": results.samples.get(
                                          ("worker", key + ".cpu"), {}).get(system, [])}})
    return found


def table(found: list[dict[str, Any]], skipped: dict[tuple[str, str], str]) -> str:
    head = ("worker run", "jobs/s", "CPU us a job", "server's", "vs BullMQ", "vs Dramatiq",
            "target", "")
    lines = [head]
    for row in found:
        lines.append((row["figure"], f"{row['rate']:,.0f}",
                      "-" if row["cpu_us"] is None else f"{row['cpu_us']:.1f}",
                      "-" if row["server_cpu_us"] is None else f"{row['server_cpu_us']:.1f}",
                      row["vs_bullmq"] or "", row["vs_dramatiq"] or "", row["target"] or "",
                      {True: "met", False: "NOT MET", None: ""}[row["met"]]))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    out = ["  ".join(cell.rjust(w) if i in (1, 2, 3, 4, 5) else cell.ljust(w)
                     for i, (cell, w) in enumerate(zip(line, widths, strict=True))).rstrip()
           for line in lines]
    out += [f"* worker on {system}: {reason}" for (scenario, system), reason in skipped.items()
            if scenario == "worker"]
    return "\n".join(out)
