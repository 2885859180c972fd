"""The README's producer and worker run as written, against a real emqd.

The snippets are taken from README.md (the fenced block after each
`<!-- readme-test: NAME -->` marker) and run unchanged in subprocesses; only
$EMQD_URL points them at the test's server.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from emqd.client import SyncQueue
from tests.support import ROOT, ServerProcess, start_emqd

pytestmark = pytest.mark.slow


def readme_snippet(name: str) -> str:
    text = (ROOT / "README.md").read_text()
    match = re.search(rf"<!-- readme-test: {name} -->\n```python\n(.*?)```", text, re.S)
    assert match, f"README.md has no `readme-test: {name}` snippet"
    return match.group(1)


def test_the_snippets_are_five_lines_or_fewer() -> None:
    for name in ("producer", "worker"):
        lines = [line for line in readme_snippet(name).splitlines() if line.strip()]
        assert len(lines) <= 5, (name, lines)


@pytest.fixture
def server() -> Iterator[ServerProcess]:
    server = start_emqd()
    yield server
    server.stop()


def test_the_readme_producer_and_worker_run_as_written(server: ServerProcess) -> None:
    env = {**os.environ, "EMQD_URL": f"redis://127.0.0.1:{server.port}",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    produced = subprocess.run([sys.executable, "-c", readme_snippet("producer")], env=env,
                              capture_output=True, text=True, timeout=30)
    assert produced.returncode == 0, produced.stderr
    assert produced.stdout.startswith("queued job 1 ")

    worker = subprocess.Popen([sys.executable, "-c", readme_snippet("worker")], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              start_new_session=True)
    try:
        with SyncQueue("mail", env["EMQD_URL"]) as mail:
            deadline = time.monotonic() + 15
            while mail.get("1").state != "completed":
                assert time.monotonic() < deadline, "the README worker did not complete the job"
                assert worker.poll() is None, worker.stdout.read()
                time.sleep(0.05)
            assert mail.get("1").result == b"sent"
        worker.send_signal(signal.SIGTERM)
        output, _ = worker.communicate(timeout=10)
        assert worker.returncode == 0, output
        assert "sending to ada@example.com" in output
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate(timeout=10)
