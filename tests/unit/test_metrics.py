"""The metrics registry as the admin port shows it: Prometheus text a scraper can parse,
with each family's HELP and TYPE from the catalogue, and the Ostrich-style /stats.txt
PinLater operators read; and the catalogue's hold on what may be recorded."""

from __future__ import annotations

import re
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pinledger.service.observability.catalogue import CATALOGUE, MetricSpec
from pinledger.service.observability.metrics import Metrics

_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:\\[\\"n]|[^"\\\n])*"'
SAMPLE = re.compile(rf"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{{{_LABEL}(?:,{_LABEL})*\}})? (\S+)")


def parse(text: str) -> dict[str, float]:
    """Every line is a HELP or TYPE comment or `name{labels} value`; returns series ->
    value."""
    assert text.endswith("\n")
    series: dict[str, float] = {}
    for line in text.split("\n")[:-1]:  # the format splits on \n only; \r may be in a value
        if line.startswith("#"):
            assert re.fullmatch(r"# TYPE \S+ (counter|gauge|histogram)|# HELP \S+ [^\n]*", line), (
                line
            )
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
        m.observe("pinledger_forward_seconds", s)
    line = m.stats_txt().splitlines()[-1]
    fields = {k: float(v) for k, v in re.findall(r"(\w+)=([^,)]+)", line)}
    assert 0 <= fields["p50"] <= fields["p90"] <= fields["p99"] <= fields["max"]
    assert fields["max"] == pytest.approx(max(samples), rel=1e-5)


@given(st.lists(st.floats(min_value=-10, max_value=1e6), max_size=50))
def test_observing_many_at_once_equals_observing_each(samples: list[float]) -> None:
    one_by_one, at_once = Metrics(), Metrics()
    for s in samples:
        one_by_one.observe("pinledger_dequeue_delay_seconds", s, queue="q")
    at_once.observe_many("pinledger_dequeue_delay_seconds", samples, queue="q")
    assert at_once.prometheus() == one_by_one.prometheus()
    assert at_once.stats_txt() == one_by_one.stats_txt()
    # Nothing observed: no series at all, not one of count 0.
    assert ("pinledger_dequeue_delay_seconds" in at_once.prometheus()) == bool(samples)


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
    m.count("pinledger_rpc_total", method="x")
    with pytest.raises(ValueError, match="is a counter"):
        m.set_gauge("pinledger_rpc_total", 1, method="x")
    with pytest.raises(ValueError, match="is a counter"):
        m.set_gauge("pinledger_connections_closed_total", 1, reason="idle")
    with pytest.raises(ValueError, match="only increase"):
        m.count("pinledger_rpc_total", -1, method="x")


def test_a_metric_not_in_the_catalogue_is_refused() -> None:
    m = Metrics()
    with pytest.raises(ValueError, match=r"not in the metrics catalogue: add it to service/"):
        m.count("pinledger_made_up_total")
    with pytest.raises(ValueError, match="not in the metrics catalogue"):
        m.replace_gauges("pinledger_made_up", [])
    assert "made_up" not in m.prometheus()


def test_a_series_must_carry_exactly_its_metrics_labels() -> None:
    m = Metrics()
    with pytest.raises(ValueError, match=r"takes the labels \(action, queue\), got \(queue\)"):
        m.count("pinledger_jobs_total", queue="q")
    with pytest.raises(ValueError, match=r"takes the labels \(\), got \(queue\)"):
        m.set_gauge("pinledger_owned_partitions", 1, queue="q")
    with pytest.raises(ValueError, match=r"got \(action, queue, server\)"):
        m.count("pinledger_jobs_total", queue="q", action="enqueue", server="s")
    assert m.prometheus() == ""


def _example_labels(spec: MetricSpec) -> dict[str, str]:
    return {label: "x" for label in spec.labels}


def test_help_and_type_lines_come_from_the_catalogue() -> None:
    """Every catalogued metric, once recorded, is introduced by its catalogue entry's
    HELP and TYPE lines, in that order, right before its first sample."""
    m = Metrics()
    for spec in CATALOGUE:
        labels = _example_labels(spec)
        if spec.kind == "counter":
            m.count(spec.name, 1, **labels)
        elif spec.kind == "gauge":
            m.set_gauge(spec.name, 1, **labels)
        else:
            m.observe(spec.name, 0.1, **labels)
    lines = m.prometheus().splitlines()
    for spec in CATALOGUE:
        at = lines.index(f"# HELP {spec.name} {spec.help}")
        assert lines[at + 1] == f"# TYPE {spec.name} {spec.kind}"
        assert lines[at + 2].startswith(spec.name)
    headings = [line for line in lines if line.startswith("#")]
    assert len(headings) == 2 * len(CATALOGUE)  # one HELP and one TYPE per family


def test_help_is_escaped() -> None:
    odd = MetricSpec("pinledger_odd", "gauge", (), "", "a \\ backslash\nand a line end")
    m = Metrics({odd.name: odd})
    m.set_gauge("pinledger_odd", 1)
    assert (
        m.prometheus().splitlines()[0] == "# HELP pinledger_odd a \\\\ backslash\\nand a line end"
    )


def test_replacing_a_gauges_series_removes_those_not_given() -> None:
    m = Metrics()
    m.set_gauge("pinledger_projection_lag_records", 3, topic="a", partition="0")
    m.set_gauge("pinledger_projection_lag_records", 5, topic="a", partition="1")
    m.set_gauge("pinledger_owned_partitions", 2)
    m.replace_gauges(
        "pinledger_projection_lag_records",
        [({"topic": "a", "partition": "1"}, 7.0), ({"topic": "b", "partition": "0"}, 0.0)],
    )
    series = parse(m.prometheus())
    assert {k: v for k, v in series.items() if "lag" in k} == {
        'pinledger_projection_lag_records{partition="1",topic="a"}': 7,
        'pinledger_projection_lag_records{partition="0",topic="b"}': 0,
    }
    assert series["pinledger_owned_partitions"] == 2
    m.replace_gauges("pinledger_projection_lag_records", [])
    assert "lag" not in m.prometheus()
    with pytest.raises(ValueError, match="takes the labels"):
        m.replace_gauges("pinledger_projection_lag_records", [({"topic": "a"}, 1.0)])


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
