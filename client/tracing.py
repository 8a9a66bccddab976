"""Trace context for workers: run a job's handler inside a span that continues the job's
own trace, inside the attempt the dequeue started (the server hands the attempt's
context with the job), so the user's own spans nest inside the attempt.

Uses only the OpenTelemetry API: with no SDK configured the tracer is a no-op and this
costs a dict lookup per job.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from pinledger.client.jobs import DequeuedJob

_PROPAGATOR = TraceContextTextMapPropagator()
_tracer = trace.get_tracer("pinledger.worker")


@contextmanager
def job_span(queue: str, job: DequeuedJob) -> Iterator[trace.Span]:
    """A consumer span named `process <queue>` whose parent is the attempt's context
    (when the job carries one: its enqueue was traced)."""
    parent = _PROPAGATOR.extract({"traceparent": job.traceparent}) if job.traceparent else None
    with _tracer.start_as_current_span(
        f"process {queue}",
        context=parent,
        kind=trace.SpanKind.CONSUMER,
        attributes={
            "messaging.system": "pinledger",
            "messaging.operation.type": "process",
            "messaging.destination.name": queue,
            "messaging.message.id": job.descriptor,
            "pinledger.attempt": job.attempt,
        },
    ) as span:
        yield span
