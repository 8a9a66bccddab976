"""In-process metrics, exported on the admin port as Prometheus text (/metrics) and as
the Ostrich-style plain text PinLater operators read on /stats.txt.

The catalogue (what the server records; labels in braces):

    pinledger_rpc_total{method}                        counter    Thrift calls received
    pinledger_rpc_errors_total{method,code}            counter    calls that ended in an error
    pinledger_rpc_seconds{method}                      histogram  call latency
    pinledger_jobs_total{queue,action}                 counter    jobs, by action: enqueue,
        dequeue, ack_success, ack_failure, ack_rejected, checkpoint, timeout, gc, retry, delete
    pinledger_dequeue_delay_seconds{queue}             histogram  how long a job waited past
                                                                  its run_after before a claim
    pinledger_owned_partitions                         gauge      partitions this server owns
    pinledger_projection_lag_records{topic,partition}  gauge      records the projection is
                                                                  behind the log
    pinledger_partition_paused{queue,partition}        gauge      1 while an owned partition
        is paused at a record its store refuses or no release decodes (decision 0032;
        /ready names it with the offset and the `pinledger skip-record` command), 0 once
        it resumes
    pinledger_dependency_up{dependency}                gauge      Kafka / Postgres answered
                                                                  the last health probe
    pinledger_loop_lag_seconds{loop}                   gauge      since a background loop
                                                                  last turned
    pinledger_ledger_format                            gauge      the cluster's ledger format
                                                                  this server follows
    pinledger_ledger_format_newest_read                gauge      the newest format it reads
    pinledger_connections_open                         gauge      Thrift connections served
    pinledger_connections_closed_total{reason}         counter    client, idle, oversized,
                                                                  garbage, refused
    pinledger_live_traces_total{outcome}               counter    traced jobs whose ended
        attempts the owner sent to the trace export: exported, dropped (past
        PINLEDGER_TRACE_QUEUE), gave_up, no_history (service/ownership/live_traces.py)
    pinledger_trace_spans_dropped_total{reason}        counter    spans the trace export
        lost: queue_full (the SDK's batch queue was full), export_failed (the collector
        did not take a batch) (pinledger/otel.py)
    pinledger_ledger_jobs_total{queue,outcome}         counter    what the ledger applied
    pinledger_ledger_rejected_total{queue,action}      counter    events it rejected
    pinledger_ledger_queue_wait_seconds{queue}         histogram  due -> claim
    pinledger_ledger_run_seconds{queue,outcome}        histogram  claim -> end of attempt
        (the ledger_* series: service/observability/ledger_metrics.py, counted by the
        partition's owner)

Counter names end in _total, as Prometheus expects; they are exported as given.
"""

from __future__ import annotations

import bisect
import math
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

# Seconds. Spans a fast RPC (1 ms) to a job that sat five minutes past its run_after.
BUCKETS: tuple[float, ...] = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 300.0, math.inf,
)  # fmt: skip
PERCENTILES: tuple[tuple[str, float], ...] = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")

_Labels = tuple[tuple[str, str], ...]
_Key = tuple[str, _Labels]


@dataclass
class _Histogram:
    buckets: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))  # not cumulative
    count: int = 0
    total: float = 0.0
    max: float = 0.0

    def percentile(self, q: float) -> float:
        """Estimate by linear interpolation inside the bucket holding the q-th value; the
        +Inf bucket's upper edge is the largest value seen, so no estimate exceeds it."""
        rank = q * self.count
        seen = 0
        for i, n in enumerate(self.buckets):
            if n and seen + n >= rank:
                low = BUCKETS[i - 1] if i else 0.0
                high = min(BUCKETS[i], self.max)
                return min(self.max, low + (high - low) * max(0.0, rank - seen) / n)
            seen += n
        return self.max


class Metrics:
    """Counters, gauges and histograms keyed by name and labels. Thread-safe: the Thrift
    handlers, the owner loop and the admin port all touch it, so one lock guards it all.
    A name keeps the kind it was first used with; reusing it as another kind is a bug and
    raises ValueError."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kinds: dict[str, str] = {}
        self._counters: dict[_Key, float] = {}
        self._gauges: dict[_Key, float] = {}
        self._histograms: dict[_Key, _Histogram] = {}

    def count(self, name: str, value: float = 1.0, **labels: str) -> None:
        if value < 0:
            raise ValueError(f"counter {name} can only increase, got {value}")
        key = self._key("counter", name, labels)
        with self._lock:
            self._counters[key] = self._counters.get(key, 0.0) + value

    def observe(self, name: str, seconds: float, **labels: str) -> None:
        self.observe_many(name, (seconds,), **labels)

    def observe_many(self, name: str, values: Sequence[float], **labels: str) -> None:
        """Several observations of one series at once: one key and one lock for them all
        (the owner observes a batch of thousands of claims this way)."""
        if not values:
            return
        key = self._key("histogram", name, labels)
        with self._lock:
            h = self._histograms.get(key)
            if h is None:
                h = self._histograms[key] = _Histogram()
            buckets = h.buckets
            for value in values:
                # A job claimed a little before its run_after (clocks of two servers)
                # would give a negative delay; it waited no time, and a negative value
                # would shrink the sum.
                seconds = max(value, 0.0)
                buckets[bisect.bisect_left(BUCKETS, seconds)] += 1
                h.count += 1
                h.total += seconds
                h.max = max(h.max, seconds)

    def set_gauge(self, name: str, value: float, **labels: str) -> None:
        key = self._key("gauge", name, labels)
        with self._lock:
            self._gauges[key] = value

    @contextmanager
    def timer(self, name: str, **labels: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:  # a call that failed took time too; its latency belongs in the histogram
            self.observe(name, time.perf_counter() - start, **labels)

    def snapshot_counter(self, name: str, **labels: str) -> float:
        with self._lock:
            return self._counters.get((name, _labels(labels)), 0.0)

    def snapshot_gauge(self, name: str, **labels: str) -> float | None:
        with self._lock:
            return self._gauges.get((name, _labels(labels)))

    def prometheus(self) -> str:
        """Text exposition format 0.0.4."""
        lines: list[str] = []
        with self._lock:
            for kind, series in (("counter", self._counters), ("gauge", self._gauges)):
                last = ""
                for (name, labels), value in sorted(series.items()):
                    if name != last:
                        lines.append(f"# TYPE {name} {kind}")
                        last = name
                    lines.append(f"{name}{_prom_labels(labels)} {_num(value)}")
            last = ""
            for (name, labels), h in sorted(self._histograms.items()):
                if name != last:
                    lines.append(f"# TYPE {name} histogram")
                    last = name
                cumulative = 0
                for bound, n in zip(BUCKETS, h.buckets, strict=True):
                    cumulative += n
                    le = _prom_labels((*labels, ("le", _num(bound))))
                    lines.append(f"{name}_bucket{le} {cumulative}")
                lines.append(f"{name}_sum{_prom_labels(labels)} {_num(h.total)}")
                lines.append(f"{name}_count{_prom_labels(labels)} {h.count}")
        return "".join(line + "\n" for line in lines)

    def stats_txt(self) -> str:
        """The Ostrich layout PinLater's /stats.txt had, with labels in braces."""
        lines = ["counters:"]
        with self._lock:
            for (name, labels), value in sorted(self._counters.items()):
                lines.append(f"  {name}{_txt_labels(labels)}: {_num(value)}")
            lines.append("gauges:")
            for (name, labels), value in sorted(self._gauges.items()):
                lines.append(f"  {name}{_txt_labels(labels)}: {_num(value)}")
            lines.append("metrics:")
            for (name, labels), h in sorted(self._histograms.items()):
                fields = [f"count={h.count}", f"sum={h.total:.6g}"]
                fields.append(f"average={h.total / h.count:.6g}")
                fields += [f"{p}={h.percentile(q):.6g}" for p, q in PERCENTILES]
                fields.append(f"max={h.max:.6g}")
                lines.append(f"  {name}{_txt_labels(labels)}: ({', '.join(fields)})")
        return "".join(line + "\n" for line in lines)

    def _key(self, kind: str, name: str, labels: dict[str, str]) -> _Key:
        # A name seen before was checked then: every call of every RPC comes here.
        known = self._kinds.get(name)
        if known is None:
            if not _NAME.fullmatch(name):
                raise ValueError(f"metric name {name!r} is not a valid Prometheus name")
            with self._lock:
                known = self._kinds.setdefault(name, kind)
        if known != kind:
            raise ValueError(f"metric {name} is a {known}, not a {kind}")
        return name, _labels(labels)


def _labels(labels: dict[str, str]) -> _Labels:
    return tuple(sorted(labels.items()))


def _num(value: float) -> str:
    value = float(value)  # callers may pass an int, which has no is_integer before 3.12
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _prom_labels(labels: _Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels) + "}"


def _txt_labels(labels: _Labels) -> str:
    return "{" + ",".join(f"{k}={v}" for k, v in labels) + "}" if labels else ""
