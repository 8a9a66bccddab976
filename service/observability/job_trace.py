"""The ids of a job's own trace (docs/decisions/0028-a-trace-per-job.md), derived, never
stored: every server, the worker's dequeue answer, the live export of attempts and
`pinledger trace --otlp` compute the same ones from what the ledger holds.

- trace id: from the enqueue call's trace id (the traceparent its record carries) and
  the descriptor; from the descriptor alone when the enqueue was not traced (a queue
  deleted and created again reuses descriptors, never an enqueue's trace id);
- the job's span (its whole life, the trace's root): from the trace id and descriptor;
- each attempt's span: from the trace id, the descriptor and the attempt's claim, which
  the owner knows when it claims (the attempt's number it does not: the state machine
  does not count claims).

The sampled flag is the enqueue's: a job enqueued in an unsampled trace costs no span
anywhere (parent-based sampling in the worker too).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags

from pinledger.service.observability import telemetry


def _hash(size: int, *parts: str) -> int:
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    return int.from_bytes(digest[:size], "big") or 1


def trace_id(enqueue_traceparent: str | None, descriptor: str) -> int:
    """The job's trace id."""
    return _trace_id(telemetry.parse_traceparent(enqueue_traceparent), descriptor)


def _trace_id(enqueue: SpanContext | None, descriptor: str) -> int:
    if enqueue is None:
        return _hash(16, "pinledger job", descriptor)
    return _hash(16, "pinledger job", f"{enqueue.trace_id:032x}", descriptor)


def job_span_id(trace: int, descriptor: str) -> int:
    return _hash(8, f"{trace:032x}", descriptor, "job")


def attempt_span_id(trace: int, descriptor: str, claim: str) -> int:
    return _hash(8, f"{trace:032x}", descriptor, f"claim {claim}")


def _span_context(enqueue: SpanContext, descriptor: str, claim: str | None) -> SpanContext:
    """The context of the job's span (`claim` None) or of an attempt's, sampled as the
    enqueue was."""
    trace = _trace_id(enqueue, descriptor)
    span = (
        job_span_id(trace, descriptor)
        if claim is None
        else attempt_span_id(trace, descriptor, claim)
    )
    return SpanContext(trace, span, is_remote=True, trace_flags=TraceFlags(enqueue.trace_flags))


def _context(enqueue_traceparent: str | None, descriptor: str, claim: str | None) -> str | None:
    enqueue = telemetry.parse_traceparent(enqueue_traceparent)
    if enqueue is None:
        return None
    return telemetry.format_traceparent(_span_context(enqueue, descriptor, claim))


def job_traceparent(enqueue_traceparent: str | None, descriptor: str) -> str | None:
    """The context of the job's span, for spans that belong to its life as a whole (its
    enqueue); None when the enqueue was not traced."""
    return _context(enqueue_traceparent, descriptor, None)


def attempt_traceparent(enqueue_traceparent: str | None, descriptor: str, claim: str) -> str | None:
    """The context of the attempt a claim starts: handed to the worker with the job, so
    its processing nests in the attempt; None when the enqueue was not traced."""
    return _context(enqueue_traceparent, descriptor, claim)


def sampled(enqueue_traceparent: str | None) -> bool:
    enqueue = telemetry.parse_traceparent(enqueue_traceparent)
    return enqueue is not None and enqueue.trace_flags.sampled


def create_spans(
    queue: str, descriptors: Sequence[object], at_ms: int, enqueue_traceparent: str | None
) -> None:
    """The `create <queue>` span of each job an enqueue call appended (OpenTelemetry's
    messaging `create`), in the job's own trace under its job span: from the
    millisecond the ledger stamped the job with, which is where the job's span starts,
    to now, linking to the call. Nothing when the call was not traced or not sampled."""
    enqueue = telemetry.parse_traceparent(enqueue_traceparent)
    if enqueue is None or not enqueue.trace_flags.sampled:
        return
    tracer = telemetry.tracer()
    start = at_ms * 1_000_000
    call = [Link(enqueue)]  # the enqueue call, for a viewer to follow
    for descriptor in descriptors:
        name = str(descriptor)
        parent = _span_context(enqueue, name, None)
        tracer.start_span(
            f"create {queue}",
            context=trace.set_span_in_context(trace.NonRecordingSpan(parent)),
            kind=SpanKind.PRODUCER,
            start_time=start,
            links=call,
            attributes={
                "messaging.system": "pinledger",
                "messaging.operation.type": "create",
                "messaging.destination.name": queue,
                "messaging.message.id": name,
                "pinledger.descriptor": name,
            },
        ).end()
