"""OpenTelemetry's SDK set up from the standard OTEL_* variables, for every process of
pinledger that makes spans: a server (service/observability/telemetry.py), a Worker and
the tools. Shared by the server and the client library as the IDL is (pinledger/idl.py),
so both read the variables alike.

Off by default. `setup()` installs an SDK tracer provider exporting OTLP/HTTP only when
asked to (`OTEL_TRACES_EXPORTER=otlp` or `console`, or an
`OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT` with OTEL_TRACES_EXPORTER unset); the exporter
reads the rest of its OTEL_* variables (headers, timeout, compression) itself, and the
provider its sampler (OTEL_TRACES_SAMPLER: parent-based by default, so a trace that
was not sampled where it started costs no span here either). With no SDK provider
installed, `active()` is false and callers skip every span.

Spans lost on their way out are reported to the `on_dropped` callback `setup` is given
(the server counts them in `pinledger_trace_spans_dropped_total{reason}`): `queue_full`,
the batch queue was full and the SDK dropped its oldest span (the exporter cannot keep
up), and `export_failed`, the exporter did not take a batch (the collector is down or
refused it). The SDK itself only logs both.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SpanExporter,
    SpanExportResult,
)

log = logging.getLogger(__name__)

_TRUE = ("true", "1", "yes")

# Why spans were dropped on their way out (the `reason` of on_dropped).
QUEUE_FULL = "queue_full"
EXPORT_FAILED = "export_failed"
# on_dropped(reason, spans)
OnDropped = Callable[[str, int], None]


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


class Keeping(SpanProcessor):
    """Passes on to `inner` only the finished spans `keep` says are worth exporting
    (a server's empty polls are not: service/observability/telemetry.py)."""

    def __init__(self, inner: SpanProcessor, keep: Callable[[ReadableSpan], bool]) -> None:
        self._inner = inner
        self._keep = keep

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self._inner.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if self._keep(span):
            self._inner.on_end(span)

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


class CountingExporter(SpanExporter):
    """Hands batches to `inner` and reports the spans of a batch it did not take."""

    def __init__(self, inner: SpanExporter, on_dropped: OnDropped) -> None:
        self._inner = inner
        self._on_dropped = on_dropped

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self._inner.export(spans)
        except Exception:
            self._on_dropped(EXPORT_FAILED, len(spans))
            raise
        if result is not SpanExportResult.SUCCESS:
            self._on_dropped(EXPORT_FAILED, len(spans))
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


class CountingDrops(SpanProcessor):
    """A BatchSpanProcessor that reports the spans its full queue pushes out. The SDK
    drops the oldest queued span when a new one ends on a full queue, and says so only
    in a log line. The queue is a bounded deque the SDK keeps as `_batch_processor._queue`
    (1.45, pinned); should a release rename it, nothing is counted and nothing breaks
    (tests/unit/test_trace_drops.py fails, saying so)."""

    def __init__(self, inner: BatchSpanProcessor, on_dropped: OnDropped) -> None:
        self._inner: SpanProcessor = inner  # the base class's methods are typed
        self._on_dropped = on_dropped
        queue = getattr(getattr(inner, "_batch_processor", None), "_queue", None)
        self._queue: deque[object] | None = queue if isinstance(queue, deque) else None

    def _full(self) -> bool:
        queue = self._queue
        return queue is not None and queue.maxlen is not None and len(queue) >= queue.maxlen

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self._inner.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if self._full():
            self._on_dropped(QUEUE_FULL, 1)
        self._inner.on_end(span)

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


def batch_processor(
    exporter: SpanExporter,
    on_dropped: OnDropped | None = None,
    max_queue_size: int | None = None,
    max_export_batch_size: int | None = None,
) -> SpanProcessor:
    """The SDK's batching processor for `exporter` (sizes from the OTEL_BSP_* variables
    unless given), reporting the spans it drops to `on_dropped` when given."""
    if on_dropped is None:
        return BatchSpanProcessor(
            exporter, max_queue_size=max_queue_size, max_export_batch_size=max_export_batch_size
        )
    batch = BatchSpanProcessor(
        CountingExporter(exporter, on_dropped),
        max_queue_size=max_queue_size,
        max_export_batch_size=max_export_batch_size,
    )
    return CountingDrops(batch, on_dropped)


def setup(
    env: Mapping[str, str] | None = None,
    service_name: str = "pinledger",
    keep: Callable[[ReadableSpan], bool] | None = None,
    on_dropped: OnDropped | None = None,
) -> bool:
    """Install the SDK tracer provider when the environment asks for export; True when
    tracing is on. Idempotent; a provider someone else installed (the application, a
    test) is kept. `service_name`: when OTEL_SERVICE_NAME does not say; `keep`: which
    finished spans are exported (all without it); `on_dropped(reason, spans)`: told of
    the spans lost on their way out (the module's docstring)."""
    env = os.environ if env is None else env
    if not wants_export(env):
        return active()
    with _Installed.lock:
        if _Installed.provider is not None or active():
            return True
        name = env.get("OTEL_SERVICE_NAME") or service_name
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
            batch = batch_processor(exporter, on_dropped)
            provider.add_span_processor(batch if keep is None else Keeping(batch, keep))
        trace.set_tracer_provider(provider)
        _Installed.provider = provider
        log.info("OpenTelemetry traces on: service.name=%s, exporters %s", name, sorted(exporters))
        return True


def otlp_exporter() -> OTLPSpanExporter:
    """An OTLP/HTTP (protobuf) span exporter configured by the OTEL_EXPORTER_OTLP_*
    variables (default endpoint http://localhost:4318/v1/traces)."""
    return OTLPSpanExporter()


def send(spans: Sequence[ReadableSpan]) -> bool:
    """Hand spans built elsewhere (a job's attempts, built from its history with the
    ids they must have) to the installed SDK provider's processors, as if they had just
    ended here: they go out with the process's other spans, through its exporter,
    filter and batching. False when no SDK provider is installed."""
    provider = trace.get_tracer_provider()
    # The SDK has no public way to reach its processors; this attribute has been its
    # name for them since 1.0.
    processor: SpanProcessor | None = getattr(provider, "_active_span_processor", None)
    if processor is None:
        return False
    for span in spans:
        processor.on_end(span)
    return True


def flush(timeout_ms: int = 5000) -> None:
    """Send the spans still batched by the provider `setup` installed (a worker that
    stops, in a process that may go on)."""
    with _Installed.lock:
        provider = _Installed.provider
    if provider is not None:
        provider.force_flush(timeout_ms)


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
