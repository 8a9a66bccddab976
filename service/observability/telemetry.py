"""OpenTelemetry for the server: tracer setup from the standard OTEL_* variables, RPC
spans, and the trace context a job carries from its enqueue to every later action.

Off by default: the SDK is set up from the OTEL_* variables by pinledger/otel.py. With no
SDK provider installed, `active()` is false and the server skips every span, attribute
dict and header: tracing costs one isinstance check per RPC.

Trace context of a job (W3C `traceparent`):

- The RPC span is a root: PinLater's RequestContext has no trace context, so a call
  starts a trace, unless its `requestId` is itself a W3C traceparent (a client that
  wants the enqueue inside its own trace can send one there; PinLater clients send an
  opaque id, which never parses as one).
- enqueueJobs writes the RPC span's traceparent into the enqueue record's headers;
  the projection stores it in jobs.traceparent and job_events.traceparent.
- Claims, timeouts and applied acks/checkpoints/retries, possibly days later, are
  spans in their own traces that LINK to each job's enqueue context; the dequeue
  response hands the context to the worker, whose job span is a child of it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from pinledger.otel import EXPORT_FAILED, QUEUE_FULL, OnDropped, active
from pinledger.service.observability import catalogue
from pinledger.service.observability.metrics import Metrics

log = logging.getLogger(__name__)

TRACER_NAME = "pinledger.server"
# Spans the trace export lost, by reason (pinledger/otel.py: queue_full, export_failed).
SPANS_DROPPED = catalogue.TRACE_SPANS_DROPPED_TOTAL
# The SDK keeps at most 128 links per span by default; more would be dropped silently.
MAX_LINKS = 128

_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


def tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER_NAME)


def count_dropped(metrics: Metrics) -> OnDropped:
    """The `on_dropped` of the server's trace export: counts the spans it lost. Each
    reason's series exists from the start, at 0, so that a rate over it (the
    TraceExportDropping alert) sees the first drop, and a scrape shows the metric."""
    for reason in (QUEUE_FULL, EXPORT_FAILED):
        metrics.count(SPANS_DROPPED, 0, reason=reason)

    def dropped(reason: str, spans: int) -> None:
        metrics.count(SPANS_DROPPED, spans, reason=reason)

    return dropped


# -- W3C traceparent ---------------------------------------------------------------


def parse_traceparent(text: str | None) -> SpanContext | None:
    """The remote span context a traceparent names; None when absent or malformed."""
    if not text:
        return None
    match = _TRACEPARENT.match(text.strip().lower())
    if match is None:
        return None
    trace_id, span_id = int(match.group(1), 16), int(match.group(2), 16)
    if not trace_id or not span_id:
        return None
    return SpanContext(
        trace_id, span_id, is_remote=True, trace_flags=TraceFlags(int(match.group(3), 16))
    )


def format_traceparent(ctx: SpanContext) -> str | None:
    if not ctx.is_valid:
        return None
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def current_traceparent() -> str | None:
    """The traceparent of the current span (None when tracing is off: the no-op span's
    context is invalid)."""
    return format_traceparent(trace.get_current_span().get_span_context())


def links(traceparents: Iterable[str | None]) -> list[Link]:
    """Links to the distinct valid contexts among `traceparents` (at most MAX_LINKS)."""
    found: dict[tuple[int, int], Link] = {}
    for text in traceparents:
        ctx = parse_traceparent(text)
        if ctx is not None and (ctx.trace_id, ctx.span_id) not in found:
            found[(ctx.trace_id, ctx.span_id)] = Link(ctx)
            if len(found) >= MAX_LINKS:
                break
    return list(found.values())


# -- RPC spans --------------------------------------------------------------------------


class RpcSpan:
    """A server span made current for the duration of one RPC."""

    __slots__ = ("span", "token")

    def __init__(self, span: Span, token: object) -> None:
        self.span = span
        self.token = token


def start_rpc(method: str, args: tuple[Any, ...]) -> RpcSpan | None:
    """Start and make current the SERVER span of one PinLater call (None when tracing
    is off). `args` are the Thrift arguments, the RequestContext first."""
    if not active():
        return None
    request_context = args[0] if args else None
    request_id = getattr(request_context, "requestId", None)
    parent = parse_traceparent(request_id) if isinstance(request_id, str) else None
    ctx = (
        trace.set_span_in_context(trace.NonRecordingSpan(parent))
        if parent is not None
        else otel_context.Context()  # a root: nothing of the thread's context leaks in
    )
    span = tracer().start_span(f"pinlater/{method}", context=ctx, kind=SpanKind.SERVER)
    token = otel_context.attach(trace.set_span_in_context(span))
    return RpcSpan(span, token)


# The calls a worker makes in a loop: an empty answer is a poll, not an event.
_POLLS = frozenset({"pinlater/dequeueJobs", "pinlater/dequeueOwned"})


def worth_keeping(span: ReadableSpan) -> bool:
    """Whether a finished span is worth exporting: every span but an empty poll that
    started its own trace (a worker polling an idle queue would fill a viewer's search
    with them; `pinledger_rpc_total{method="dequeueJobs"}` counts them). A poll inside
    a caller's trace is kept: the caller asked for it."""
    if span.name not in _POLLS or span.parent is not None:
        return True
    jobs_out = (span.attributes or {}).get("pinledger.jobs_out")
    return bool(jobs_out) or span.status.status_code is StatusCode.ERROR


def end_rpc(rpc: RpcSpan, method: str, args: tuple[Any, ...], result: Any, code: str) -> None:
    """Describe the call on its span, end it and restore the thread's context."""
    span = rpc.span
    try:
        if span.is_recording():
            span.set_attributes(rpc_attributes(method, args, result, code))
            if code != "ok":
                span.set_status(Status(StatusCode.ERROR, code))
    finally:
        otel_context.detach(rpc.token)  # type: ignore[arg-type]
        span.end()


def _size(value: Any) -> int | None:
    return len(value) if isinstance(value, list | dict | set | tuple) else None


def rpc_attributes(method: str, args: tuple[Any, ...], result: Any, code: str) -> dict[str, Any]:
    """The span attributes of one call: method, queue, request id and source, how many
    jobs came in and went out, and the error code ("ok" when none)."""
    attrs: dict[str, Any] = {
        "rpc.system": "apache_thrift",
        "rpc.service": "PinLater",
        "rpc.method": method,
        "pinledger.error_code": code,
    }
    request_context = args[0] if args else None
    if request_context is not None:
        if getattr(request_context, "requestId", None):
            attrs["pinledger.request_id"] = str(request_context.requestId)
        if getattr(request_context, "source", None):
            attrs["pinledger.source"] = str(request_context.source)
    request = args[1] if len(args) > 1 else None
    if isinstance(request, str):  # createQueue, deleteQueue
        attrs["pinledger.queue"] = request
    elif request is not None:
        queue = getattr(request, "queueName", None)
        if isinstance(queue, str):
            attrs["pinledger.queue"] = queue
        jobs_in = _jobs_in(request)
        if jobs_in is not None:
            attrs["pinledger.jobs_in"] = jobs_in
    jobs_out = _jobs_out(result)
    if jobs_out is not None:
        attrs["pinledger.jobs_out"] = jobs_out
    return attrs


def _acks(request: Any) -> int:
    return len(getattr(request, "jobsSucceeded", None) or []) + len(
        getattr(request, "jobsFailed", None) or []
    )


def _jobs_in(request: Any) -> int | None:
    for name in ("jobs", "jobDescriptors", "requests"):
        size = _size(getattr(request, name, None))
        if size is not None:
            return size
    if hasattr(request, "jobsSucceeded"):  # ackDequeuedJobs
        return _acks(request)
    ack = getattr(request, "jobAckRequest", None)
    if ack is not None:  # a dequeue with piggybacked acks
        return _acks(ack)
    return None


def _jobs_out(result: Any) -> int | None:
    if isinstance(result, bool) or result is None:
        return None
    if isinstance(result, int):  # retryFailedJobs, deleteJobs, getJobCount
        return result
    for name in ("jobDescriptors", "jobs", "scannedJobs"):
        size = _size(getattr(result, name, None))
        if size is not None:
            return size
    if isinstance(result, dict):  # lookupJobs
        return len(result)
    return None


# -- spans of the ledger's own actions ---------------------------------------------------


def start_job_span(
    name: str,
    traceparents: Iterable[str | None],
    attributes: Mapping[str, Any],
    parent: str | None = None,
    root: bool = False,
) -> Span:
    """A span of an action on jobs (claim, timeout, applied acks) linking to each job's
    enqueue context. Parent: the traceparent given, else a new root when `root`, else
    the current span. Call only when `active()`."""
    parent_ctx = parse_traceparent(parent)
    if parent_ctx is not None:
        ctx: otel_context.Context | None = trace.set_span_in_context(
            trace.NonRecordingSpan(parent_ctx)
        )
    else:
        ctx = otel_context.Context() if root else None
    return tracer().start_span(
        name, context=ctx, kind=SpanKind.INTERNAL, links=links(traceparents), attributes=attributes
    )
