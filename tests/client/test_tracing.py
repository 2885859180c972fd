"""OpenTelemetry traces (emqd/client/tracing.py): one trace from a producer's add, in this
process, to the handler's run in an `emqd-worker` subprocess; and without OpenTelemetry
(or without a tracer provider) nothing is imported and nothing is sent.

This process records its spans in the SDK's InMemorySpanExporter; the worker writes its
own to a file (tests/client/otel_spans.py). The global tracer provider is set for this
test only (monkeypatched, then restored): OpenTelemetry sets it once a process, and the
other tests' adds must stay untraced.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from emqd.client import SyncQueue
from tests.client.test_worker_e2e import WorkerProcess, wait_for
from tests.support import ROOT


@pytest.fixture
def exporter(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    yield memory
    provider.shutdown()


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_one_trace_from_the_producers_add_to_the_handler_in_a_worker_process(
        exporter: InMemorySpanExporter, emqd_port: int, tmp_path: Path) -> None:
    spans_file = tmp_path / "worker-spans.jsonl"
    with SyncQueue("traced", f"redis://127.0.0.1:{emqd_port}") as queue:
        with trace.get_tracer("tests").start_as_current_span("POST /upload") as request:
            job_id = queue.add(b"cat.jpg")
        row = queue.get(job_id)
        assert row is not None and row.fields["trace"].startswith(b"00-")
        worker = WorkerProcess("tests.client.otel_spans:handle", "traced", emqd_port,
                               "--lease-ms", "3000", "--progress-interval", "0",
                               env={"EMQD_OTEL_SPANS": str(spans_file)})
        try:
            finished = queue.wait(job_id, 15000)
            assert finished is not None and finished.result == b"handled cat.jpg"
            wait_for(lambda: spans_file.exists() and len(spans_file.read_text().splitlines())
                     >= 2, 10, "the worker's spans")
        finally:
            worker.signal(signal.SIGTERM)
            worker.proc.wait(15)
            worker.stop()
        assert worker.proc.returncode == 0, worker.output()

    send, = (span for span in exporter.get_finished_spans() if span.name == "send traced")
    assert send.kind is trace.SpanKind.PRODUCER
    assert send.parent is not None and send.parent.span_id == request.get_span_context().span_id
    assert dict(send.attributes or {}) == {
        "messaging.system": "emqd", "messaging.destination.name": "traced",
        "messaging.operation.name": "send", "messaging.operation.type": "send",
        "messaging.message.id": job_id}
    trace_id = f"{send.context.trace_id:032x}"

    spans = {span["name"]: span for span in map(json.loads, spans_file.read_text().splitlines())}
    process, resize = spans["process traced"], spans["resize"]
    assert process["kind"] == "CONSUMER" and process["status"] != "ERROR"
    assert process["trace_id"] == resize["trace_id"] == trace_id  # one trace, two processes
    assert process["parent_id"] == f"{send.context.span_id:016x}"
    assert resize["parent_id"] == process["span_id"]  # the handler runs inside it
    attributes = process["attributes"]
    assert attributes["messaging.system"] == "emqd"
    assert attributes["messaging.destination.name"] == "traced"
    assert attributes["messaging.message.id"] == job_id
    assert attributes["messaging.operation.name"] == "process"
    assert attributes["emqd.token"] == str(attributes["emqd.attempts"])
    assert attributes["emqd.outcome"] == "completed"


def test_a_failing_add_marks_its_span_an_error(exporter: InMemorySpanExporter,
                                               emqd_port: int) -> None:
    with SyncQueue("traced", f"redis://127.0.0.1:{emqd_port}") as queue, \
            pytest.raises(Exception, match="PRIORITY"):
        queue.add(b"x", priority=5000)
    send, = exporter.get_finished_spans()
    assert send.status.status_code is trace.StatusCode.ERROR


# OpenTelemetry made absent by a meta-path finder that refuses it; `tried` keeps the imports
# of it that emqd's own code asked for (redis-py's observability tries, and copes, itself).
BLOCKER = textwrap.dedent("""
    import sys
    import traceback

    tried = []

    class Blocker:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "opentelemetry":
                frames = [frame.filename for frame in traceback.extract_stack()[:-1]
                          if not frame.filename.startswith("<frozen")]
                if "/emqd/" in frames[-1]:  # the module that asked for it is emqd's
                    tried.append(name)
                raise ImportError(f"blocked: {name}")
            return None

    if sys.argv[1] == "absent":
        sys.meta_path.insert(0, Blocker())
    else:
        import opentelemetry.trace  # installed, and no tracer provider set

    from emqd.client import Queue, Worker  # noqa: F401
    from emqd.client import tracing
    from emqd.client.commands import QueueCommands

    add = next(QueueCommands("mail").add(b"x"))[0]
    assert b"TRACE" not in add and "TRACE" not in add, add
    assert tracing.trace_api() is None
    if sys.argv[1] == "absent":
        assert tried == [], tried
        assert not any(name.startswith("opentelemetry") for name in sys.modules)
    print("ok")
""")


@pytest.mark.parametrize("opentelemetry", ["absent", "unconfigured"])
def test_without_opentelemetry_or_a_provider_nothing_is_imported_or_sent(
        opentelemetry: str) -> None:
    ran = subprocess.run([sys.executable, "-c", BLOCKER, opentelemetry], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and ran.stdout.strip() == "ok", ran.stderr
