"""emqd/bench/lanes.py end to end, with tiny sizes: it runs, prints both cases and the ratios.

No figure is asserted (speed is the benchmark's business, not the suite's).
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support import ROOT


def test_the_lanes_benchmark_runs_and_prints_both_cases(tmp_path) -> None:  # type: ignore[no-untyped-def]
    done = subprocess.run(
        [sys.executable, "-m", "emqd.bench.lanes", "--lanes", "40", "--jobs", "200",
         "--conns", "2", "--pipeline", "10", "--repeat", "1", "--no-pin"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines()[1:]}
    assert set(rows) >= {"flat", "lanes", "ratio"}, done.stdout
    assert all(float(value.replace(",", "")) > 0 for value in rows["lanes"]), done.stdout
