"""`emqd-worker --processes N`: N worker processes under one supervisor.

One Python process runs one core at most (the GIL), so a machine's other cores
take other processes, as Celery's, Dramatiq's and RQ's worker pools do. The
supervisor starts N `emqd-worker ... --processes 1` children and does nothing
else:

- **One graceful stop for all**: SIGTERM or SIGINT to the supervisor is passed
  to every child once (each gets its grace period; a second signal is passed
  on too, ending the grace at once), and the supervisor exits when they all have.
  The children run in sessions of their own, so a Ctrl-C in a terminal reaches
  them only through the supervisor (twice would end their grace).
- **A child that dies is started again** (killed, crashed, or stopped by someone
  else), half a second later, doubling up to 10 s while children die young. A child that
  exits 1 or 2 (the server refused the worker for good, the handler cannot be
  loaded, a bad argument) would only do so again: the supervisor stops the others
  and exits with that status.
- **Children never outlive it**: each holds the read end of a pipe whose write
  end only the supervisor holds; when the supervisor is gone (even SIGKILLed), the
  pipe reads end-of-file and the child stops gracefully (`watch_parent`).

Each child is a whole worker with its own pid, connections and name, so the
dashboard's Workers page lists each process, and `--concurrency` is per process.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

from emqd.client.reconnect import Backoff

PARENT_FD_ENV = "EMQD_WORKER_PARENT_FD"
FATAL_STATUSES = (1, 2)  # emqd-worker's own "refused for good" and "bad arguments"
YOUNG_S = 5.0  # a child that dies sooner than this after its start makes the next wait longer
POLL_S = 0.1


class Supervisor:
    """Runs `processes` children of `child_argv` until a stop signal; `run()` returns the
    exit status."""

    def __init__(self, child_argv: list[str], processes: int,
                 say: Callable[[str], None]) -> None:
        self.child_argv = child_argv
        self.processes = processes
        self.say = say
        self.children: list[subprocess.Popen[bytes]] = []
        self.started_at: dict[int, float] = {}
        self.due: dict[int, float] = {}  # a dead child's place -> when to start another
        self.signals = 0  # stop signals received (and not yet passed on)
        self.passed = 0
        self.status = 0
        self.backoff = Backoff(first_s=0.5, max_s=10.0)

    def run(self) -> int:
        read_end, write_end = os.pipe()
        previous = {sig: signal.signal(sig, self._signalled)
                    for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            self.children = [self._spawn(read_end) for _ in range(self.processes)]
            while True:
                self._pass_signals()
                if not self.passed:
                    self._restart_the_dead(read_end)
                elif all(child.poll() is not None for child in self.children):
                    break
                time.sleep(POLL_S)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            os.close(write_end)
            os.close(read_end)
        return self.status

    def _signalled(self, signum: int, frame: object) -> None:
        self.signals += 1

    def _pass_signals(self) -> None:
        while self.passed < self.signals:
            self.passed += 1
            for child in self.children:
                if child.poll() is None:
                    child.send_signal(signal.SIGTERM)

    def _spawn(self, read_end: int) -> subprocess.Popen[bytes]:
        child = subprocess.Popen(self.child_argv, pass_fds=(read_end,),
                                 env={**os.environ, PARENT_FD_ENV: str(read_end)},
                                 start_new_session=True)
        self.started_at[child.pid] = time.monotonic()
        return child

    def _restart_the_dead(self, read_end: int) -> None:
        now = time.monotonic()
        for at, child in enumerate(self.children):
            status = child.poll()
            if status is None:
                continue
            if status in FATAL_STATUSES:
                self.say(f"emqd-worker: process {child.pid} exited {status}; stopping the others")
                self.status = status
                self.signals += 1  # the others stop as at SIGTERM
                return
            if at not in self.due:
                lived = now - self.started_at.pop(child.pid, now)
                if lived >= YOUNG_S:
                    self.backoff.reset()
                delay = self.backoff.next()
                self.due[at] = now + delay
                self.say(f"emqd-worker: process {child.pid} exited ({_how(status)}) after "
                         f"{lived:.1f} s; starting another in {delay:.1f} s")
            elif now >= self.due[at]:
                del self.due[at]
                self.children[at] = self._spawn(read_end)


def _how(status: int) -> str:
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"status {status}"


def watch_parent(on_gone: Callable[[], None]) -> None:
    """In a child of the supervisor (its pipe's read end in $EMQD_WORKER_PARENT_FD), call
    `on_gone` on the running loop once the supervisor is gone."""
    raw = os.environ.get(PARENT_FD_ENV)
    if not raw:
        return
    fd = int(raw)
    loop = asyncio.get_running_loop()

    def readable() -> None:
        try:
            if os.read(fd, 1):
                return  # nothing is ever written: only end-of-file matters
        except OSError:
            pass
        loop.remove_reader(fd)
        on_gone()

    loop.add_reader(fd, readable)


def child_argv(argv: list[str]) -> list[str]:
    """The command line of a child: this one, as one process (argparse keeps the last
    `--processes`)."""
    return [sys.executable, "-m", "emqd.client", *argv, "--processes", "1"]
