"""A traced handler for `emqd-worker` subprocesses (tests/client/test_tracing.py).

Importing it (as emqd-worker imports its handler) sets OpenTelemetry's SDK up, as an
application would, with an exporter that appends each ended span to the file
$EMQD_OTEL_SPANS as one JSON line, so that the test reads the worker's spans across
the process boundary.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from emqd.client import Job


class FileExporter(SpanExporter):
    """Each span, as it ends, a JSON line: what the test compares."""

    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with open(self.path, "a") as out:
            for span in spans:
                out.write(json.dumps(as_dict(span)) + "\n")
        return SpanExportResult.SUCCESS


def as_dict(span: ReadableSpan) -> dict[str, object]:
    context = span.get_span_context()
    assert context is not None
    return {"name": span.name, "kind": span.kind.name,
            "trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}",
            "parent_id": None if span.parent is None else f"{span.parent.span_id:016x}",
            "attributes": dict(span.attributes or {}), "status": span.status.status_code.name}


provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(FileExporter(os.environ["EMQD_OTEL_SPANS"])))
trace.set_tracer_provider(provider)


async def handle(job: Job) -> str:
    """A handler with a span of its own, to show it is a child of the worker's."""
    with trace.get_tracer("tests").start_as_current_span("resize"):
        return f"handled {job.payload.decode()}"
