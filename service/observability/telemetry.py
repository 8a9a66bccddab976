"""OpenTelemetry for the server: tracer setup from the standard OTEL_* variables, RPC
spans, and the trace context a job carries from its enqueue to every later action.

Off by default. `setup()` installs an SDK tracer provider exporting OTLP/HTTP only when
asked to (`OTEL_TRACES_EXPORTER=otlp`, or an `OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT`
with OTEL_TRACES_EXPORTER unset); the exporter reads the rest of its OTEL_* variables
(headers, timeout, compression) itself. With no SDK provider installed, `active()` is
false and the server skips every span, attribute dict and header: tracing costs one
isinstance check per RPC.

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
import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode, TraceFlags

log = logging.getLogger(__name__)

TRACER_NAME = "pinledger.server"
# The SDK keeps at most 128 links per span by default; more would be dropped silently.
MAX_LINKS = 128

_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
_TRUE = ("true", "1", "yes")


class _Installed:
    """The SDK provider `setup` installed (one per process, by OpenTelemetry's rules)."""

    lock = threading.Lock()
    provider: TracerProvider | None = None


def wants_export(env: Mapping[str, str]) -> bool:
    """Whether the OTEL_* variables ask for trace export (off unless they do)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() in _TRUE:
        return False
    exporters = {e.strip().lower() for e in env.get("OTEL_TRACES_EXPORTER", "").split(",")}
    exporters.discard("")
    if exporters:
        return bool(exporters & {"otlp", "console"})
    return bool(
        env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    )


def setup(env: Mapping[str, str] | None = None) -> bool:
    """Install the SDK tracer provider when the environment asks for export; True when
    tracing is on. Idempotent; a provider someone else installed (tests) is kept."""
    env = os.environ if env is None else env
    if not wants_export(env):
        return active()
    with _Installed.lock:
        if _Installed.provider is not None or active():
            return True
        name = env.get("OTEL_SERVICE_NAME") or "pinledger"
        protocol = env.get(
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "")
        )
        if protocol and protocol != "http/protobuf":
            log.warning("OTLP protocol %r is not supported; exporting http/protobuf", protocol)
        provider = TracerProvider(resource=Resource.create({SERVICE_NAME: name}))
        exporters = {e.strip().lower() for e in env.get("OTEL_TRACES_EXPORTER", "otlp").split(",")}
        chosen: list[SpanExporter] = []
        if "console" in exporters:
            chosen.append(ConsoleSpanExporter())
        if "otlp" in exporters or not exporters - {""}:
            chosen.append(otlp_exporter())
        for exporter in chosen:
            provider.add_span_processor(BatchSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        _Installed.provider = provider
        log.info("OpenTelemetry traces on: service.name=%s, exporters %s", name, sorted(exporters))
        return True


def otlp_exporter() -> OTLPSpanExporter:
    """An OTLP/HTTP (protobuf) span exporter configured by the OTEL_EXPORTER_OTLP_*
    variables (default endpoint http://localhost:4318/v1/traces)."""
    return OTLPSpanExporter()


def shutdown() -> None:
    """Flush and stop the provider `setup` installed (server shutdown)."""
    with _Installed.lock:
        provider, _Installed.provider = _Installed.provider, None
    if provider is not None:
        provider.shutdown()


def active() -> bool:
    """Whether an SDK (recording) tracer provider is installed: without one every span
    would be a no-op, so callers skip building them."""
    return not isinstance(
        trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider
    )


def tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER_NAME)


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
