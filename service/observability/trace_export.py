"""A finished job's history as an OpenTelemetry trace (`pinledger trace <d> --otlp`).

One root span for the job's life (enqueue to its last step), a child span per attempt
(claim to its end), and a span event for each step, applied or rejected, on the span
it happened in: an attempt's own steps on the attempt, the rest (the enqueue, operator
retries, a stale ack arriving after its attempt ended, garbage collection) on the root.
Times are the ledger's, not the export's.

Ids are deterministic, so exporting twice gives the same trace (a viewer shows it once):

- with the enqueue's traceparent (tracing was on at enqueue), the export joins that
  trace: the root span is a child of the enqueue's RPC span;
- without one, the trace id is derived from the job descriptor.

Span ids are derived from the trace id, the descriptor and the span's role. Attempt
spans link to the claim's span of the live trace when the claim record carried one.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from pinledger import otel
from pinledger.ledger.state import JobState
from pinledger.projections.actions import Tag, action_of
from pinledger.projections.history import Attempt, JobHistory, Outcome, Step
from pinledger.service.observability import telemetry

# The action names of steps (projections/actions.py names them from the event types).
ENQUEUED = action_of(Tag.ENQUEUED)
CLAIMED = action_of(Tag.CLAIMED)

_MS = 1_000_000  # nanoseconds per millisecond
_FAILED_OUTCOMES = (Outcome.FAILED, Outcome.TIMED_OUT)


class ExportError(RuntimeError):
    """The OTLP endpoint did not take the trace."""


def _hash64(*parts: str) -> int:
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") or 1


def enqueue_traceparent(history: JobHistory) -> str | None:
    for step in history.steps:
        if step.action == ENQUEUED and step.applied and step.traceparent:
            return step.traceparent
    return None


def trace_id_for(history: JobHistory) -> int:
    """The enqueue's trace id, or one derived from the descriptor."""
    parent = telemetry.parse_traceparent(enqueue_traceparent(history))
    if parent is not None:
        return parent.trace_id
    digest = hashlib.sha256(f"pinledger job {history.descriptor}".encode()).digest()
    return int.from_bytes(digest[:16], "big") or 1


class _PlannedIds(IdGenerator):
    """Hands out the ids the exporter planned, in order."""

    def __init__(self, trace_id: int) -> None:
        self.trace_id = trace_id
        self.span_ids: list[int] = []

    def generate_trace_id(self) -> int:
        return self.trace_id

    def generate_span_id(self) -> int:
        return self.span_ids.pop(0)


class _Collect(SpanProcessor):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


def _step_attributes(step: Step) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "pinledger.offset": step.offset,
        "pinledger.index": step.idx,
        "pinledger.attempt": step.attempt,
        "pinledger.verdict": "applied" if step.applied else "rejected",
        "pinledger.source": step.source,
        "pinledger.request_id": step.request_id,
        "pinledger.server": step.server,
    }
    if not step.applied:
        attrs["pinledger.reason"] = step.reason
    if step.claim:
        attrs["pinledger.claim"] = step.claim
    attrs["pinledger.state_after"] = (
        "REMOVED" if step.state_after is None else step.state_after.name
    )
    if step.attempts_remaining_after is not None:
        attrs["pinledger.attempts_remaining"] = step.attempts_remaining_after
    if step.status_change is not None:
        attrs["pinledger.status_change"] = step.status_change.kind
        attrs["pinledger.status_text"] = step.status_change.text
    return attrs


def _attempt_attributes(attempt: Attempt) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "pinledger.attempt": attempt.number,
        "pinledger.claim": attempt.claim,
        "pinledger.outcome": attempt.outcome.value,
        "pinledger.queued_ms": attempt.queued_ms,
        "pinledger.timeout_lost_ms": attempt.timeout_lost_ms,
    }
    if attempt.running_ms is not None:
        attrs["pinledger.running_ms"] = attempt.running_ms
    if attempt.retry_delay_ms is not None:
        attrs["pinledger.retry_delay_ms"] = attempt.retry_delay_ms
    return attrs


def _placement(history: JobHistory, last_at: int) -> dict[int, list[Step]]:
    """Which span each step goes on: its attempt's (number) when it happened while that
    attempt ran, else the root (0)."""
    windows = {a.number: (a.claimed_at, a.ended_at or last_at) for a in history.attempts}
    placed: dict[int, list[Step]] = {0: []}
    for step in history.steps:
        window = windows.get(step.attempt)
        inside = window is not None and window[0] <= step.at <= window[1]
        placed.setdefault(step.attempt if inside else 0, []).append(step)
    return placed


def build_spans(history: JobHistory, service_name: str = "pinledger") -> list[ReadableSpan]:
    """The job's trace: the root span first, then one span per attempt."""
    if not history.steps:
        raise ValueError(f"job {history.descriptor} has no history in the ledger")
    trace_id = trace_id_for(history)
    ids = _PlannedIds(trace_id)
    collect = _Collect()
    provider = TracerProvider(
        sampler=ALWAYS_ON,
        resource=Resource.create({SERVICE_NAME: service_name}),
        id_generator=ids,
        # A job heartbeating for days has many events; a viewer should see them all.
        span_limits=SpanLimits(max_events=100_000),
    )
    provider.add_span_processor(collect)
    tracer = provider.get_tracer("pinledger.trace_export")
    first_at = min(step.at for step in history.steps)
    last_at = max(step.at for step in history.steps)
    placed = _placement(history, last_at)

    parent = telemetry.parse_traceparent(enqueue_traceparent(history))
    ctx = trace.set_span_in_context(trace.NonRecordingSpan(parent)) if parent else None
    job = history.job
    final = "REMOVED" if job is None else job.state.name
    ids.span_ids.append(_hash64(f"{trace_id:032x}", history.descriptor, "job"))
    root = tracer.start_span(
        f"job {history.queue}",
        context=ctx if ctx is not None else trace.set_span_in_context(trace.INVALID_SPAN),
        kind=SpanKind.CONSUMER,
        start_time=first_at * _MS,
        attributes={
            "pinledger.descriptor": history.descriptor,
            "pinledger.queue": history.queue,
            "pinledger.partition": history.partition,
            "pinledger.final_state": final,
            "pinledger.attempts": len(history.attempts),
            "pinledger.steps": len(history.steps),
        },
    )
    for step in placed[0]:
        root.add_event(step.action, _step_attributes(step), timestamp=step.at * _MS)
    root_ctx = trace.set_span_in_context(root)
    claims = {s.attempt: s.traceparent for s in history.steps if s.action == CLAIMED}
    for attempt in history.attempts:
        ids.span_ids.append(
            _hash64(f"{trace_id:032x}", history.descriptor, f"attempt {attempt.number}")
        )
        span = tracer.start_span(
            f"attempt {attempt.number}",
            context=root_ctx,
            kind=SpanKind.INTERNAL,
            start_time=attempt.claimed_at * _MS,
            attributes=_attempt_attributes(attempt),
            links=[Link(c) for c in [telemetry.parse_traceparent(claims.get(attempt.number))] if c],
        )
        for step in placed.get(attempt.number, []):
            span.add_event(step.action, _step_attributes(step), timestamp=step.at * _MS)
        if attempt.outcome in _FAILED_OUTCOMES:
            span.set_status(Status(StatusCode.ERROR, attempt.outcome.value))
        span.end(end_time=(attempt.ended_at or last_at) * _MS)
    if job is not None and job.state == JobState.FAILED:
        root.set_status(Status(StatusCode.ERROR, "the job failed"))
    root.end(end_time=last_at * _MS)
    provider.shutdown()
    # The root ends last but goes first: the life of the job, then its attempts.
    return collect.spans[-1:] + collect.spans[:-1]


def endpoint(env: Mapping[str, str]) -> str:
    """Where the OTLP/HTTP exporter sends traces, by the OTEL_* variables."""
    traces = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if traces:
        return traces
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318")
    return base.rstrip("/") + "/v1/traces"


def export(history: JobHistory, exporter: SpanExporter | None = None) -> list[ReadableSpan]:
    """Send the job's trace in one OTLP request; returns the spans sent."""
    env = os.environ
    spans = build_spans(history, env.get("OTEL_SERVICE_NAME") or "pinledger")
    sender = exporter if exporter is not None else otel.otlp_exporter()
    try:
        result = sender.export(spans)
    finally:
        sender.shutdown()
    if result != SpanExportResult.SUCCESS:
        raise ExportError(f"the OTLP endpoint {endpoint(env)} did not take the trace")
    return spans


def run(history: JobHistory) -> int:
    """`pinledger trace --otlp`: export, and say where it went."""
    try:
        spans = export(history)
    except (ValueError, ExportError) as exc:
        print(f"pinledger trace: {exc}", file=sys.stderr)
        return 2
    trace_id = trace_id_for(history)
    print(
        f"exported job {history.descriptor} as trace {trace_id:032x} ({len(spans)} spans: "
        f"1 job, {len(spans) - 1} attempts; {len(history.steps)} events) to "
        f"{endpoint(os.environ)}"
    )
    return 0


def summary(spans: Sequence[ReadableSpan]) -> list[tuple[str, list[str]]]:
    """(span name, event names) per span: what a viewer shows, for tests and logs."""
    return [(s.name, [e.name for e in s.events]) for s in spans]
