"""In-process metrics, exported on the admin port as Prometheus text (/metrics) and as
the Ostrich-style plain text PinLater operators read on /stats.txt.

What may be recorded is the catalogue (catalogue.py: each metric's name, type, labels,
unit and help, and the manual's metrics reference generated from it). The registry
refuses a name the catalogue lacks, a name recorded as another type than its own, and a
series whose label names are not the metric's, by raising ValueError at the call: a
metric cannot be exported without being documented, and the tests that exercise an
emitter catch a slip. /metrics writes each family's `# HELP` and `# TYPE` lines from the
catalogue.

Counter names end in _total, as Prometheus expects; they are exported as given.
"""

from __future__ import annotations

import bisect
import math
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from pinledger.service.observability.catalogue import BY_NAME, MetricSpec

# Seconds. Spans a fast RPC (1 ms) to a job that sat five minutes past its run_after.
BUCKETS: tuple[float, ...] = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 300.0, math.inf,
)  # fmt: skip
PERCENTILES: tuple[tuple[str, float], ...] = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))

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
    Only the metrics of `catalogue` (the catalogue by default) may be recorded, each as
    its type and with its label names; anything else is a bug and raises ValueError."""

    def __init__(self, catalogue: Mapping[str, MetricSpec] = BY_NAME) -> None:
        self._lock = threading.Lock()
        self._catalogue = catalogue
        # The metrics recorded so far: checked against the catalogue on first use.
        self._specs: dict[str, MetricSpec] = {}
        self._counters: dict[_Key, float] = {}
        self._gauges: dict[_Key, float] = {}
        self._histograms: dict[_Key, _Histogram] = {}

    def count(self, name: str, value: float = 1.0, **labels: str) -> None:
        if value < 0:
            raise ValueError(f"counter {name} can only increase, got {value}")
        key = self._key("counter", name, labels)
        with self._lock:
            current = self._counters.get(key)
            if current is None:
                self._new_series(key)
                current = 0.0
            self._counters[key] = current + value

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
                self._new_series(key)
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
            if key not in self._gauges:
                self._new_series(key)
            self._gauges[key] = value

    def replace_gauges(self, name: str, values: Iterable[tuple[Mapping[str, str], float]]) -> None:
        """Set every series of the gauge `name` at once, (labels, value) each: a series
        not given is removed (a partition no longer owned, a queue deleted), so that no
        stale number outlives what it measured."""
        self._check(name, "gauge")
        keys = {self._key("gauge", name, dict(labels)): value for labels, value in values}
        with self._lock:
            for key in keys:
                if key not in self._gauges:
                    self._new_series(key)
            for key in [k for k in self._gauges if k[0] == name and k not in keys]:
                del self._gauges[key]
            self._gauges.update(keys)

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
        """Text exposition format 0.0.4; each family's HELP and TYPE from the catalogue."""
        lines: list[str] = []
        with self._lock:
            for series in (self._counters, self._gauges):
                last = ""
                for (name, labels), value in sorted(series.items()):
                    if name != last:
                        lines += self._heading(name)
                        last = name
                    lines.append(f"{name}{_prom_labels(labels)} {_num(value)}")
            last = ""
            for (name, labels), h in sorted(self._histograms.items()):
                if name != last:
                    lines += self._heading(name)
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

    def _heading(self, name: str) -> list[str]:
        spec = self._specs[name]
        return [f"# HELP {name} {_escape_help(spec.help)}", f"# TYPE {name} {spec.kind}"]

    def _check(self, name: str, kind: str) -> MetricSpec:
        """The catalogue's spec of `name`, which must be a `kind`."""
        spec = self._specs.get(name)
        if spec is None:
            spec = self._catalogue.get(name)
            if spec is None:
                raise ValueError(
                    f"metric {name!r} is not in the metrics catalogue: add it to "
                    "service/observability/catalogue.py, with its type, labels and help"
                )
            with self._lock:
                self._specs[name] = spec
        if spec.kind != kind:
            raise ValueError(f"metric {name} is a {spec.kind}, not a {kind}")
        return spec

    def _key(self, kind: str, name: str, labels: dict[str, str]) -> _Key:
        # Every call of every RPC comes here: the name's type is checked on each call (a
        # dict lookup), its label names only when a series is new (`_new_series`).
        self._check(name, kind)
        return name, _labels(labels)

    def _new_series(self, key: _Key) -> None:
        """Refuse a series whose label names are not its metric's (before it is stored;
        called with the lock held, once per series)."""
        name, labels = key
        names = self._specs[name].label_key
        given = tuple(k for k, _ in labels)
        if given != names:
            raise ValueError(
                f"metric {name} takes the labels ({', '.join(names)}), got ({', '.join(given)})"
            )


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


def _escape_help(text: str) -> str:
    """A HELP text escaped as the format wants (a backslash, a line end)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _prom_labels(labels: _Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels) + "}"


def _txt_labels(labels: _Labels) -> str:
    return "{" + ",".join(f"{k}={v}" for k, v in labels) + "}" if labels else ""
