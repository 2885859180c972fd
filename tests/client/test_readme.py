"""The README's producer and worker run as written, against a real emqd.

The snippets are taken from README.md (the fenced block after each
`<!-- readme-test: NAME -->` marker) and run unchanged in subprocesses; only
$EMQD_URL points them at the test's server.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from emqd.client import SyncQueue
from tests.support import ROOT, ServerProcess, start_emqd

pytestmark = pytest.mark.slow


def readme_snippet(name: str, language: str = "python") -> str:
    text = (ROOT / "README.md").read_text()
    match = re.search(rf"<!-- readme-test: {name} -->\n```{language}\n(.*?)```", text, re.S)
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
    assert produced.stdout.startswith("queued job ")
    job_id = produced.stdout.split()[2]

    worker = subprocess.Popen([sys.executable, "-c", readme_snippet("worker")], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              start_new_session=True)
    try:
        with SyncQueue("mail", env["EMQD_URL"]) as mail:
            deadline = time.monotonic() + 15
            while mail.get(job_id).state != "completed":
                assert time.monotonic() < deadline, "the README worker did not complete the job"
                assert worker.poll() is None, worker.stdout.read()
                time.sleep(0.05)
            assert mail.get(job_id).result == b"sent to ada@example.com"
        worker.send_signal(signal.SIGTERM)
        output, _ = worker.communicate(timeout=10)
        assert worker.returncode == 0, output
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate(timeout=10)


def test_the_readme_command_line_runs_the_worker_snippet_saved_as_tasks_py(
        server: ServerProcess, tmp_path: Path) -> None:
    """`emqd-worker tasks:send_mail` imports the snippet: that must not start the
    snippet's own worker (it used to, and the command never got to run its own)."""
    (tmp_path / "tasks.py").write_text(readme_snippet("worker"))
    argv = shlex.split(readme_snippet("cli", "sh"))
    assert argv[0] == "emqd-worker"
    argv[argv.index("--url") + 1] = f"redis://127.0.0.1:{server.port}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                                     os.environ.get("PYTHONPATH")]))}
    env.pop("EMQD_URL", None)
    worker = subprocess.Popen([sys.executable, "-m", "emqd.client", *argv[1:],
                               "--progress-interval", "0.2"],
                              cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        with SyncQueue("mail", f"redis://127.0.0.1:{server.port}") as mail:
            job_id = mail.add_json({"to": "ada@example.com"})
            deadline = time.monotonic() + 15
            line = ""
            while "done=1 " not in line:  # the command's own progress line: its worker ran it
                assert time.monotonic() < deadline, "emqd-worker never reported the job done"
                line = worker.stderr.readline()  # type: ignore[union-attr]
                assert line, "emqd-worker exited"
            assert mail.get(job_id).result == b"sent to ada@example.com"
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=10)
        assert worker.returncode == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate(timeout=10)
