"""The judge of a partition scenario: what the clients were told (load.py's records), and
what the cluster holds at the end (`dump`), against the promises of docs/CLUSTER.md.

- lost: an ADD answered with its id whose job the cluster does not hold, and
  that no COMPLETE was acknowledged for;
- tokens twice: a (queue, job, token) that two CLAIMs were answered with (two
  workers ran the job under one fence);
- added twice: two jobs with the payload of one ADD sent once without an id
  (a front sent it on again after it may have been applied);
- completions undone: a COMPLETE answered OK whose job the cluster does not
  hold as `completed`; completed twice: two COMPLETEs of one job answered OK;
- late: a request answered later than its bound (its own blocking time, plus
  the lease and the write timeout, plus `slack_s` for the pauses between two
  looks at an owner), time its front spent stopped (SIGSTOP) not counted.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Dump = dict[str, dict[str, dict[str, str]]]  # queue -> job id -> its row


@dataclass
class Bounds:
    lease_s: float
    timeout_s: float
    slack_s: float = 1.5
    # front name -> the wall-clock windows it was stopped in (SIGSTOP to SIGCONT)
    frozen: dict[str, list[tuple[float, float]]] = field(default_factory=dict)

    def of(self, record: dict[str, Any]) -> float:
        """How long `record`'s request may take."""
        blocking = record.get("block_ms", 0) / 1000 if record["op"] == "claim" else 0.0
        bound = blocking + self.lease_s + self.timeout_s + self.slack_s
        front = record["client"].split("-")[0]
        for start, end in self.frozen.get(front, ()):
            bound += max(0.0, min(end, record["t1"]) - max(start, record["t0"]))
        return bound


@dataclass
class Verdict:
    lost: list[tuple[str, str]] = field(default_factory=list)
    tokens_twice: list[tuple[str, str, str]] = field(default_factory=list)
    added_twice: list[tuple[str, str]] = field(default_factory=list)
    completions_undone: list[tuple[str, str, str, str]] = field(default_factory=list)
    completed_twice: list[tuple[str, str]] = field(default_factory=list)
    late: list[tuple[str, str, float, float]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def faults(self) -> dict[str, int]:
        return {"lost": len(self.lost), "tokens twice": len(self.tokens_twice),
                "added twice": len(self.added_twice),
                "completions undone": len(self.completions_undone),
                "completed twice": len(self.completed_twice), "late": len(self.late)}

    def __str__(self) -> str:
        examples = {name: getattr(self, name)[:5] for name in
                    ("lost", "tokens_twice", "added_twice", "completions_undone",
                     "completed_twice", "late")
                    if getattr(self, name)}
        return f"faults {self.faults()}, counts {self.counts}, examples {examples}"


def read(paths: Iterable[Path]) -> list[dict[str, Any]]:
    records = []
    for path in paths:
        with open(path) as lines:
            records += [json.loads(line) for line in lines if line.strip()]
    return records


def judge(records: list[dict[str, Any]], dump: Dump, bounds: Bounds) -> Verdict:
    verdict = Verdict()
    added = {(r["queue"], r["id"]) for r in records if r["op"] == "add" and r["error"] is None}
    claims = Counter((r["queue"], r["id"], r["token"]) for r in records
                     if r["op"] == "claim" and r["error"] is None and "id" in r)
    completes = [(r["queue"], r["id"], r["token"]) for r in records
                 if r["op"] == "complete" and r["error"] is None]
    completed = {(queue, job) for queue, job, _ in completes}
    for queue, job in sorted(added):
        if job not in dump.get(queue, {}) and (queue, job) not in completed:
            verdict.lost.append((queue, job))
    verdict.tokens_twice = sorted(key for key, n in claims.items() if n > 1)
    sent_once = {r["payload"] for r in records if r["op"] == "add" and "payload" in r}
    held = Counter((queue, row.get("payload")) for queue, rows in dump.items()
                   for row in rows.values() if row.get("payload") in sent_once)
    verdict.added_twice = sorted(key for key, n in held.items() if n > 1)
    for queue, job, token in completes:
        state = dump.get(queue, {}).get(job, {}).get("state", "(no row)")
        if state != "completed":
            verdict.completions_undone.append((queue, job, token, state))
    verdict.completed_twice = sorted(
        key for key, n in Counter((q, j) for q, j, _ in completes).items() if n > 1)
    for record in records:
        waited = record["t1"] - record["t0"]
        bound = bounds.of(record)
        if waited > bound:
            verdict.late.append((record["client"], record["op"], round(waited, 2),
                                 round(bound, 2)))
    verdict.counts = {"adds acknowledged": len(added), "claims": sum(claims.values()),
                      "completes acknowledged": len(completes), "requests": len(records),
                      "refused": sum(1 for r in records if r["error"] is not None)}
    return verdict
