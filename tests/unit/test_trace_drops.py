"""Spans the trace export loses are counted (`pinledger_trace_spans_dropped_total{reason}`,
alerted on by PinledgerTraceExportDropping): those the SDK's full batch queue pushes out,
and those of batches the collector did not take. The SDK itself only logs both."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from pinledger import otel
from pinledger.service.observability import telemetry
from pinledger.service.observability.metrics import Metrics

WAIT_S = 10.0


class _StuckCollector(SpanExporter):
    """A collector that holds the first batch until released, then refuses or takes
    every batch."""

    def __init__(self, result: SpanExportResult) -> None:
        self.result = result
        self.entered = threading.Event()
        self.release = threading.Event()
        self.batches: list[int] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.entered.set()
        assert self.release.wait(WAIT_S), "the test never released the collector"
        self.batches.append(len(spans))
        return self.result

    def shutdown(self) -> None:
        pass


def _export(collector: _StuckCollector, metrics: Metrics) -> None:
    """Five spans through a queue of two, exported one per batch: the first is held by
    the stuck collector, two wait in the queue, and the next two push out the oldest."""
    provider = TracerProvider()
    provider.add_span_processor(
        otel.batch_processor(
            collector,
            telemetry.count_dropped(metrics),
            max_queue_size=2,
            max_export_batch_size=1,
        )
    )
    tracer = provider.get_tracer("test")
    tracer.start_span("first").end()
    assert collector.entered.wait(WAIT_S), "the batch worker never exported"
    for name in ("second", "third", "fourth", "fifth"):
        tracer.start_span(name).end()
    collector.release.set()
    provider.shutdown()


def _dropped(metrics: Metrics, reason: str) -> float:
    return metrics.snapshot_counter(telemetry.SPANS_DROPPED, reason=reason)


def test_spans_a_full_queue_pushes_out_and_batches_refused_are_counted() -> None:
    metrics = Metrics()
    collector = _StuckCollector(SpanExportResult.FAILURE)
    _export(collector, metrics)
    assert sum(collector.batches) == 3  # the first, and the two the queue kept
    assert _dropped(metrics, otel.QUEUE_FULL) == 2
    assert _dropped(metrics, otel.EXPORT_FAILED) == 3
    assert 'pinledger_trace_spans_dropped_total{reason="queue_full"} 2' in metrics.prometheus()


def test_a_collector_that_takes_every_batch_loses_only_what_the_queue_pushed_out() -> None:
    metrics = Metrics()
    _export(_StuckCollector(SpanExportResult.SUCCESS), metrics)
    assert _dropped(metrics, otel.QUEUE_FULL) == 2
    assert _dropped(metrics, otel.EXPORT_FAILED) == 0


def test_an_exporter_that_raises_has_its_batch_counted() -> None:
    class _Broken(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            raise ConnectionError("collector gone")

    lost: list[tuple[str, int]] = []
    exporter = otel.CountingExporter(_Broken(), lambda reason, n: lost.append((reason, n)))
    with pytest.raises(ConnectionError):  # the SDK's batch worker logs it and goes on
        exporter.export([ReadableSpan(name="a"), ReadableSpan(name="b")])
    assert lost == [(otel.EXPORT_FAILED, 2)]
