"""docs/CLIENT.md's producer that waits, its reporting worker and its events tail run as
written, against a real emqd, each in its own process (stopped by PID)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from tests.support import ROOT, scratch, start_emqd

pytestmark = pytest.mark.slow


def snippet(name: str) -> str:
    text = (ROOT / "docs" / "CLIENT.md").read_text()
    match = re.search(rf"<!-- client-test: {name} -->\n```python\n(.*?)```", text, re.S)
    assert match, f"docs/CLIENT.md has no `client-test: {name}` snippet"
    return match.group(1)


def until(condition: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


class Script:
    """A snippet as `python -c`, its output in a file (read while it runs)."""

    def __init__(self, code: str, env: dict[str, str]) -> None:
        self.out = tempfile.NamedTemporaryFile(prefix="doc-", suffix=".log", delete=False,
                                               dir=scratch())
        self.proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=self.out,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def output(self) -> str:
        return Path(self.out.name).read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.out.close()


def test_a_producer_waits_for_the_worker_and_a_tail_sees_it_all() -> None:
    server = start_emqd()
    env = {**os.environ, "EMQD_URL": f"redis://127.0.0.1:{server.port}",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    scripts: list[Script] = []
    try:
        with redis.Redis(port=server.port) as client:
            tail = Script(snippet("tail"), env)
            scripts.append(tail)
            until(lambda: client.pubsub_numsub("emq:{thumbs}:events")[0][1] == 1, "the tail")
            worker = Script(snippet("worker"), env)
            scripts.append(worker)
            produced = subprocess.run([sys.executable, "-c", snippet("producer")], env=env,
                                      capture_output=True, text=True, timeout=60)
            assert produced.returncode == 0, produced.stderr
            assert produced.stdout == "thumbnail at thumbs/cat.jpg\n"
            until(lambda: " -> thumbs/cat.jpg" in worker.output(), "the hook")
            job_id = re.search(r"job (\w+) -> thumbs/cat.jpg", worker.output()).group(1)
            assert client.execute_command("EMQ.LOGS", "thumbs", job_id) == [b"resizing cat.jpg"]
            assert client.hget(f"emq:{{thumbs}}:job:{job_id}", "progress") == b"100"
            until(lambda: f" completed {job_id} " in tail.output(), "the tail's completed line")
        names = [line.split()[1] for line in tail.output().splitlines() if line[:1].isdigit()]
        assert names == ["added", "claimed", "progress", "progress", "completed"], tail.output()
        assert "'value': '10'" in tail.output() and "'token': '1'" in tail.output()
    finally:
        for script in scripts:
            script.stop()
        server.stop()
