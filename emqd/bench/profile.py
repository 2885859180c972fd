"""`--profile`: py-spy samples of the emqd server while a scenario runs on it.

py-spy (`pip install py-spy`) attaches to the server's PID and writes
collapsed stacks ("frame;frame;frame count" lines). `summary()` reads them
back into what docs/PERFORMANCE.md reports: the share of samples spent in
each layer of the house (wire, dispatch, verbs, store, ...) and the
functions with the most samples of their own.
"""

from __future__ import annotations

import collections
import os
import shutil
import signal
import subprocess
from pathlib import Path

# The first matching rule names a sample's layer (checked innermost frame first).
LAYERS = (
    ("store", ("emqd/store/", "sortedcontainers/")),
    ("persist (append-only file)", ("emqd/persist/",)),
    ("commit path", ("emqd/commit/path.py",)),
    ("housekeeping (timers, observe)", ("emqd/serve/housekeeping.py", "emqd/commit/dues.py")),
    ("verbs (parse, decide, plan)", ("emqd/verbs/", "emqd/compat/numbers.py", "emqd/layout.py",
                                     "emqd/clock.py")),
    ("plain commands", ("emqd/commands/",)),
    ("reply encoding", ("encode (emqd/wire/resp.py",)),
    ("request parsing", ("emqd/wire/resp.py",)),
    ("dispatch", ("emqd/dispatch.py",)),
    ("connection, socket writes", ("emqd/wire/protocol.py",)),
)


class Recorder:
    """py-spy recording one process until `stop()`."""

    def __init__(self, pid: int, out: Path) -> None:
        self.out = out
        self.proc = subprocess.Popen(
            ["py-spy", "record", "--pid", str(pid), "--rate", "250", "--format", "raw",
             "--nonblocking", "--output", str(out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


def available() -> bool:
    return shutil.which("py-spy") is not None


def summary(path: Path, top: int = 20) -> str:
    """Layer shares and the top functions by their own samples, as text."""
    own: collections.Counter[str] = collections.Counter()
    layers: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        own[frames[-1]] += n
        layers[_layer(frames)] += n
    if not total:
        return "no samples"
    lines = [f"{total} samples; by layer (innermost emqd frame):"]
    lines += [f"  {100 * n / total:5.1f}%  {name}" for name, n in layers.most_common()]
    lines.append("functions with the most samples of their own:")
    lines += [f"  {100 * n / total:5.1f}%  {frame}" for frame, n in own.most_common(top)]
    return "\n".join(lines)


def _layer(frames: list[str]) -> str:
    for frame in reversed(frames):
        for name, marks in LAYERS:
            if any(mark in frame for mark in marks):
                return name
    return "event loop (uvloop, outside emqd's code)"
