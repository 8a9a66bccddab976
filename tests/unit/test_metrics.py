"""The metrics registry as the admin port shows it: Prometheus text a scraper can parse,
and the Ostrich-style /stats.txt PinLater operators read."""

from __future__ import annotations

import re
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pinledger.service.observability.metrics import Metrics

_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:\\[\\"n]|[^"\\\n])*"'
SAMPLE = re.compile(rf"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{{{_LABEL}(?:,{_LABEL})*\}})? (\S+)")


def parse(text: str) -> dict[str, float]:
    """Every line is a comment or `name{labels} value`; returns series -> value."""
    assert text.endswith("\n")
    series: dict[str, float] = {}
    for line in text.split("\n")[:-1]:  # the format splits on \n only; \r may be in a value
        if line.startswith("#"):
            assert re.fullmatch(r"# TYPE \S+ (counter|gauge|histogram)", line), line
            continue
        m = SAMPLE.fullmatch(line)
        assert m, f"not a sample line: {line!r}"
        series[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return series


def test_counters_add_up_per_label_set() -> None:
    m = Metrics()
    m.count("pinledger_jobs_total", queue="q", action="enqueue")
    m.count("pinledger_jobs_total", 4, action="enqueue", queue="q")
    m.count("pinledger_jobs_total", queue="q", action="dequeue")
    assert m.snapshot_counter("pinledger_jobs_total", queue="q", action="enqueue") == 5
    assert m.snapshot_counter("pinledger_jobs_total", queue="q", action="dequeue") == 1
    assert m.snapshot_counter("pinledger_jobs_total", queue="other", action="dequeue") == 0


def test_prometheus_exposition_is_parseable() -> None:
    m = Metrics()
    m.count("pinledger_rpc_total", method="enqueueJobs")
    m.count("pinledger_rpc_errors_total", method="dequeueJobs", code="NO_SUCH_QUEUE")
    m.set_gauge("pinledger_owned_partitions", 3)
    m.set_gauge("pinledger_projection_lag_records", 12, topic="t", partition="0")
    for s in (0.0005, 0.003, 0.2, 7.0, 1000.0):
        m.observe("pinledger_rpc_seconds", s, method="enqueueJobs")
    text = m.prometheus()
    series = parse(text)
    assert "# TYPE pinledger_rpc_total counter" in text
    assert "# TYPE pinledger_owned_partitions gauge" in text
    assert "# TYPE pinledger_rpc_seconds histogram" in text
    assert series['pinledger_rpc_total{method="enqueueJobs"}'] == 1
    assert series["pinledger_owned_partitions"] == 3
    assert series['pinledger_projection_lag_records{partition="0",topic="t"}'] == 12
    assert series['pinledger_rpc_seconds_count{method="enqueueJobs"}'] == 5
    assert series['pinledger_rpc_seconds_sum{method="enqueueJobs"}'] == pytest.approx(1007.2035)
    assert series['pinledger_rpc_seconds_bucket{method="enqueueJobs",le="0.001"}'] == 1
    assert series['pinledger_rpc_seconds_bucket{method="enqueueJobs",le="0.25"}'] == 3
    assert series['pinledger_rpc_seconds_bucket{method="enqueueJobs",le="300"}'] == 4
    assert series['pinledger_rpc_seconds_bucket{method="enqueueJobs",le="+Inf"}'] == 5
    buckets = [v for k, v in series.items() if "_bucket" in k]
    assert buckets == sorted(buckets), "buckets are cumulative"


@given(st.text())
def test_any_label_value_survives_escaping(value: str) -> None:
    m = Metrics()
    m.count("pinledger_jobs_total", queue=value, action="enqueue")
    (key,) = parse(m.prometheus())
    quoted = re.fullmatch(r'pinledger_jobs_total\{action="enqueue",queue="(.*)"\}', key, re.S)
    assert quoted
    unescaped = re.sub(r"\\(.)", lambda c: "\n" if c[1] == "n" else c[1], quoted[1])
    assert unescaped == value


def test_output_does_not_depend_on_recording_order() -> None:
    a, b = Metrics(), Metrics()
    for q in ("b", "a", "c"):
        a.count("pinledger_jobs_total", queue=q, action="enqueue")
        a.observe("pinledger_dequeue_delay_seconds", 1.0, queue=q)
    for q in ("c", "a", "b"):
        b.observe("pinledger_dequeue_delay_seconds", 1.0, queue=q)
        b.count("pinledger_jobs_total", action="enqueue", queue=q)
    assert a.prometheus() == b.prometheus()
    assert a.stats_txt() == b.stats_txt()


def test_stats_txt_layout() -> None:
    m = Metrics()
    m.count("pinledger_jobs_total", 12, action="enqueue", queue="q")
    m.set_gauge("pinledger_owned_partitions", 4)
    for s in (0.002, 0.004, 0.006):
        m.observe("pinledger_rpc_seconds", s, method="enqueueJobs")
    lines = m.stats_txt().splitlines()
    assert lines[:5] == [
        "counters:",
        "  pinledger_jobs_total{action=enqueue,queue=q}: 12",
        "gauges:",
        "  pinledger_owned_partitions: 4",
        "metrics:",
    ]
    timing = re.fullmatch(r"  pinledger_rpc_seconds\{method=enqueueJobs\}: \((.*)\)", lines[5])
    assert timing
    fields = dict(f.split("=") for f in timing[1].split(", "))
    assert list(fields) == ["count", "sum", "average", "p50", "p90", "p99", "max"]
    assert fields["count"] == "3"
    assert float(fields["sum"]) == pytest.approx(0.012)
    assert float(fields["average"]) == pytest.approx(0.004)
    assert float(fields["max"]) == pytest.approx(0.006)
    assert 0.0025 <= float(fields["p50"]) <= 0.005  # the bucket the median fell in
    assert float(fields["p99"]) <= float(fields["max"])


@given(st.lists(st.floats(min_value=0, max_value=1e6), min_size=1))
def test_percentiles_are_ordered_and_never_exceed_max(samples: list[float]) -> None:
    m = Metrics()
    for s in samples:
        m.observe("x_seconds", s)
    line = m.stats_txt().splitlines()[-1]
    fields = {k: float(v) for k, v in re.findall(r"(\w+)=([^,)]+)", line)}
    assert 0 <= fields["p50"] <= fields["p90"] <= fields["p99"] <= fields["max"]
    assert fields["max"] == pytest.approx(max(samples), rel=1e-5)


@given(st.lists(st.floats(min_value=-10, max_value=1e6), max_size=50))
def test_observing_many_at_once_equals_observing_each(samples: list[float]) -> None:
    one_by_one, at_once = Metrics(), Metrics()
    for s in samples:
        one_by_one.observe("x_seconds", s, queue="q")
    at_once.observe_many("x_seconds", samples, queue="q")
    assert at_once.prometheus() == one_by_one.prometheus()
    assert at_once.stats_txt() == one_by_one.stats_txt()
    # Nothing observed: no series at all, not one of count 0.
    assert ("x_seconds" in at_once.prometheus()) == bool(samples)


def test_timer_records_failed_calls_too() -> None:
    m = Metrics()
    with m.timer("pinledger_rpc_seconds", method="ok"):
        pass
    with pytest.raises(RuntimeError), m.timer("pinledger_rpc_seconds", method="boom"):
        raise RuntimeError
    series = parse(m.prometheus())
    assert series['pinledger_rpc_seconds_count{method="ok"}'] == 1
    assert series['pinledger_rpc_seconds_count{method="boom"}'] == 1


def test_misuse_is_refused() -> None:
    m = Metrics()
    m.count("pinledger_rpc_total")
    with pytest.raises(ValueError, match="is a counter"):
        m.set_gauge("pinledger_rpc_total", 1)
    with pytest.raises(ValueError, match="only increase"):
        m.count("pinledger_rpc_total", -1)
    with pytest.raises(ValueError, match="not a valid"):
        m.count("bad name")


def test_concurrent_counts_are_not_lost() -> None:
    m = Metrics()

    def work() -> None:
        for _ in range(2000):
            m.count("pinledger_rpc_total", method="x")
            m.observe("pinledger_rpc_seconds", 0.01, method="x")

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert m.snapshot_counter("pinledger_rpc_total", method="x") == 16000
    assert parse(m.prometheus())['pinledger_rpc_seconds_count{method="x"}'] == 16000
