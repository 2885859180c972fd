"""OpenTelemetry traces of the client's adds and the worker's handler runs (optional).

An add is a `send {queue}` PRODUCER span whose W3C trace context the job carries
(EMQ.ADD ... TRACE, protocol section 22.4); the worker claims WITHTRACE and runs each
handler in a `process {queue}` CONSUMER span parented by it, so one trace goes from
the producer's request to the handler's own spans, across processes. The attributes
follow OpenTelemetry's messaging conventions (`messaging.system` `emqd`, ...).

Nothing here imports OpenTelemetry. Tracing is on when the application itself has
imported `opentelemetry.trace` and set a tracer provider (the SDK's): only then can
a span be recorded anywhere. Otherwise (the `otel` extra not installed, or installed
and not configured) every add sends what it sent before (no TRACE), the worker claims
without WITHTRACE, and the cost is one dictionary lookup per add or claim.

TRACE holds the `traceparent` header, and the `tracestate` one after a newline when
there is one (neither may hold a newline).
"""

from __future__ import annotations

import contextvars
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

SYSTEM = "emqd"
TRACER = "emqd.client"


def trace_api() -> Any:
    """`opentelemetry.trace` when the application loaded it and set a tracer provider;
    else None (tracing is off). The worker asks once a claim, not once a job: the
    question reads the process's environment (OpenTelemetry's provider lookup)."""
    api = sys.modules.get("opentelemetry.trace")
    if api is None or isinstance(api.get_tracer_provider(), api.ProxyTracerProvider):
        return None
    return api


@dataclass(frozen=True)
class Sending:
    """An add's span: `context` is the TRACE to send (None: nothing to send)."""

    context: str | None = None


NOT_TRACED = Sending()


@contextmanager
def sending(queue: str, job_ids: list[str], given: str | None = None) -> Iterator[Sending]:
    """A `send {queue}` PRODUCER span around an add of `job_ids` (one, or a batch), a child
    of the caller's current span; what raises inside it marks it an error. A context
    `given` by the caller is sent as it is, without a span of ours."""
    api = None if given is not None else trace_api()
    if api is None:
        yield NOT_TRACED if given is None else Sending(given)
        return
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM, "messaging.destination.name": queue,
        "messaging.operation.name": "send", "messaging.operation.type": "send"}
    if len(job_ids) == 1:
        attributes["messaging.message.id"] = job_ids[0]
    else:
        attributes["messaging.batch.message_count"] = len(job_ids)
    span = api.get_tracer(TRACER).start_span(f"send {queue}", kind=api.SpanKind.PRODUCER,
                                             attributes=attributes)
    try:
        yield Sending(_carried(api, span))
    except Exception as error:
        _failed(api, span, error)
        raise
    finally:
        span.end()


def _carried(api: Any, span: Any) -> str | None:
    """The span's W3C context as TRACE carries it; None for a span that records nothing."""
    if not span.get_span_context().is_valid:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier, context=api.set_span_in_context(span))
    parts = [carrier.get("traceparent", ""), carrier.get("tracestate", "")]
    return "\n".join(part for part in parts if part) or None


def _extracted(context: str | None) -> Any:
    """The producer's context a job carried, as OpenTelemetry's Context (None: none)."""
    if not context:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    traceparent, _, tracestate = context.partition("\n")
    carrier = {"traceparent": traceparent}
    if tracestate:
        carrier["tracestate"] = tracestate
    return TraceContextTextMapPropagator().extract(carrier)


def _failed(api: Any, span: Any, error: BaseException) -> None:
    span.record_exception(error)
    span.set_status(api.Status(api.StatusCode.ERROR, f"{type(error).__name__}: {error}"))


class Processing:
    """A handler run's `process {queue}` CONSUMER span, parented by the context its job
    carried (a new trace when it carried none); `context` runs the handler with the span
    current, so the handler's own spans are its children."""

    __slots__ = ("api", "span", "context")

    def __init__(self, api: Any, span: Any) -> None:
        self.api, self.span = api, span
        self.context = contextvars.copy_context()
        current = api.set_span_in_context(span)
        from opentelemetry import context as otel_context
        self.context.run(otel_context.attach, current)  # this copy only: dropped with it

    def end(self, outcome: str, error: BaseException | None = None) -> None:
        """The run ended: `outcome` (completed, failed, snoozed, requeued, cancelled, lost)
        as `emqd.outcome`; a handler's exception marks the span an error."""
        self.span.set_attribute("emqd.outcome", outcome)
        if error is not None:
            _failed(self.api, self.span, error)
        self.span.end()


def processing(api: Any, queue: str, job: Any) -> Processing:
    """The span of a run of `job` (a claimed Job), `api` being `trace_api()`'s answer when
    the job was claimed. The job's lane is not in CLAIM's reply, so `emqd.lane` is not
    set (EMQ.GET has it)."""
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM, "messaging.destination.name": queue,
        "messaging.operation.name": "process", "messaging.operation.type": "process",
        "messaging.message.id": job.id, "emqd.token": job.token,
        "emqd.failures": job.failures}
    if job.token.isdigit():
        attributes["emqd.attempts"] = int(job.token)  # the token is the claim count
    span = api.get_tracer(TRACER).start_span(
        f"process {queue}", context=_extracted(job.trace), kind=api.SpanKind.CONSUMER,
        attributes=attributes)
    return Processing(api, span)
