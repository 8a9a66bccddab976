"""A job's life as an OpenTelemetry trace: the spans the owner exports live as its
attempts and the job end (service/observability/live_traces.py), and all of them at
once for `pinledger trace <d> --otlp`. Both build them here, from the job's history,
so they are the same spans with the same ids: exporting again changes nothing a
viewer shows (docs/decisions/0028-a-trace-per-job.md).

Each job is a trace of its own (job_trace.py derives the ids):

- `job <descriptor>`, the root: enqueue to the job's last step, with its final state
  and, when it failed for good, an error with the last failure's message; it links to
  the enqueue call (the call that brought a batch of jobs is a trace of its own);
- `attempt N` under it, claim to ack or timeout: the time queued and the retry delay
  after it as attributes, an error with the worker's message (or the timeout) when the
  attempt failed; the worker's `process` span hangs inside it (the dequeue answer
  handed the worker this span's context);
- each step, applied or rejected, an event on the span it happened in: an attempt's
  own steps on the attempt, the rest (the enqueue, operator retries, a stale ack after
  its attempt ended, garbage collection) on the job's span.

Times are the ledger's milliseconds: a span starts at the millisecond its first step
was stamped with and ends at the end of the millisecond of its last, so that what
happened inside it (the worker's processing, measured in microseconds) stays inside.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_INSTANCE_ID, SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from pinledger import otel
from pinledger.ledger.state import JobState
from pinledger.projections.actions import Tag, action_of
from pinledger.projections.history import Attempt, JobHistory, Outcome, Step
from pinledger.service.observability import job_trace, telemetry

# The action names of steps (projections/actions.py names them from the event types).
ENQUEUED = action_of(Tag.ENQUEUED)
CLAIMED = action_of(Tag.CLAIMED)

_MS = 1_000_000  # nanoseconds per millisecond
_FAILED_OUTCOMES = (Outcome.FAILED, Outcome.TIMED_OUT)


class ExportError(RuntimeError):
    """The OTLP endpoint did not take the trace."""


def enqueue_traceparent(history: JobHistory) -> str | None:
    for step in history.steps:
        if step.action == ENQUEUED and step.applied and step.traceparent:
            return step.traceparent
    return None


def trace_id_for(history: JobHistory) -> int:
    """The job's trace id (job_trace.py)."""
    return job_trace.trace_id(enqueue_traceparent(history), history.descriptor)


def end_of(ms: int) -> int:
    """The last nanosecond of a ledger millisecond."""
    return (ms + 1) * _MS - 1


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


def _job_attributes(history: JobHistory) -> dict[str, Any]:
    """The OpenTelemetry messaging conventions' names, and pinledger's."""
    return {
        "messaging.system": "pinledger",
        "messaging.destination.name": history.queue,
        "messaging.destination.partition.id": str(history.partition),
        "messaging.message.id": history.descriptor,
        "pinledger.descriptor": history.descriptor,
        "pinledger.queue": history.queue,
        "pinledger.partition": history.partition,
    }


def _attempt_attributes(history: JobHistory, attempt: Attempt) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        **_job_attributes(history),
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


def failure_message(history: JobHistory, attempt: Attempt) -> str:
    """Why an attempt failed, as its span's error says: the worker's message (what its
    failure ack appended to the custom status), else the outcome."""
    for step in history.steps:
        if (
            step.applied
            and step.offset == attempt.end_offset
            and step.attempt == attempt.number
            and step.status_change is not None
            and step.status_change.text
        ):
            return f"{attempt.outcome.value}: {step.status_change.text}"
    if attempt.outcome is Outcome.TIMED_OUT:
        return f"timed out: no ack within the claim timeout ({attempt.timeout_lost_ms} ms lost)"
    return attempt.outcome.value


def build_spans(history: JobHistory, service_name: str = "pinledger") -> list[ReadableSpan]:
    """The job's trace: the job's span first, then one span per attempt."""
    if not history.steps:
        raise ValueError(f"job {history.descriptor} has no history in the ledger")
    enqueue = telemetry.parse_traceparent(enqueue_traceparent(history))
    trace_id = trace_id_for(history)
    ids = _PlannedIds(trace_id)
    collect = _Collect()
    provider = TracerProvider(
        sampler=ALWAYS_ON,
        # One instance for every span drawn from the ledger, whoever draws it: the SDK
        # would give each build a random service.instance.id, and a viewer would show
        # the live spans and a later export of them as two copies.
        resource=Resource.create({SERVICE_NAME: service_name, SERVICE_INSTANCE_ID: "ledger"}),
        id_generator=ids,
        # A job heartbeating for days has many events; a viewer should see them all.
        span_limits=SpanLimits(max_events=100_000),
    )
    provider.add_span_processor(collect)
    tracer = provider.get_tracer("pinledger.trace_export")
    first_at = min(step.at for step in history.steps)
    last_at = max(step.at for step in history.steps)
    placed = _placement(history, last_at)

    job = history.job
    final = "REMOVED" if job is None else job.state.name
    ids.span_ids.append(job_trace.job_span_id(trace_id, history.descriptor))
    root = tracer.start_span(
        f"job {history.descriptor}",
        context=trace.set_span_in_context(trace.INVALID_SPAN),
        kind=SpanKind.INTERNAL,
        start_time=first_at * _MS,
        links=[Link(enqueue)] if enqueue is not None else None,
        attributes={
            **_job_attributes(history),
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
        ids.span_ids.append(job_trace.attempt_span_id(trace_id, history.descriptor, attempt.claim))
        span = tracer.start_span(
            f"attempt {attempt.number}",
            context=root_ctx,
            kind=SpanKind.INTERNAL,
            start_time=attempt.claimed_at * _MS,
            attributes=_attempt_attributes(history, attempt),
            links=[Link(c) for c in [telemetry.parse_traceparent(claims.get(attempt.number))] if c],
        )
        for step in placed.get(attempt.number, []):
            span.add_event(step.action, _step_attributes(step), timestamp=step.at * _MS)
        if attempt.outcome in _FAILED_OUTCOMES:
            span.set_status(Status(StatusCode.ERROR, failure_message(history, attempt)))
        span.end(end_time=end_of(attempt.ended_at or last_at))
    if job is not None and job.state == JobState.FAILED:
        failed = [a for a in history.attempts if a.outcome in _FAILED_OUTCOMES]
        reason = failure_message(history, failed[-1]) if failed else "failed"
        root.set_status(Status(StatusCode.ERROR, f"the job failed for good; last {reason}"))
    root.end(end_time=end_of(last_at))
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
