"""The QPS and latency bookkeeping of `pinledger client`'s load modes: per-second
windows, a bounded latency histogram for the summary, and the error tally."""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from pinledger.cli.tool_text import error_line


def percentile(ordered: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of values sorted ascending (p in 0-100); 0 when empty."""
    if not ordered:
        return 0.0
    rank = math.ceil(p / 100 * len(ordered))
    return ordered[min(max(rank, 1), len(ordered)) - 1]


class Histogram:
    """Latencies in buckets 1% wide, so a run of any length (--num_queries -1) keeps
    bounded memory; a percentile is the upper bound of its bucket, at most 1% high."""

    GROWTH = 1.01
    FLOOR = 1e-6  # one microsecond: everything faster shares the first bucket

    def __init__(self) -> None:
        self.buckets: dict[int, int] = {}
        self.count = 0
        self.max = 0.0

    def add(self, value: float) -> None:
        index = math.ceil(math.log(max(value, self.FLOOR) / self.FLOOR, self.GROWTH))
        self.buckets[index] = self.buckets.get(index, 0) + 1
        self.count += 1
        self.max = max(self.max, value)

    def percentile(self, p: float) -> float:
        if not self.count:
            return 0.0
        rank = min(max(math.ceil(p / 100 * self.count), 1), self.count)
        seen = 0
        for index in sorted(self.buckets):
            seen += self.buckets[index]
            if seen >= rank:
                return min(self.FLOOR * self.GROWTH**index, self.max)
        return self.max


@dataclass(slots=True)
class Window:
    """What happened since the last report (or since the start, for the summary)."""

    calls: int = 0
    jobs: int = 0
    errors: int = 0
    latencies: list[float] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Rates:
    seconds: float
    calls: int
    jobs: int
    errors: int
    p50_ms: float
    p90_ms: float
    p99_ms: float

    @property
    def calls_per_s(self) -> float:
        return self.calls / self.seconds if self.seconds > 0 else 0.0

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / self.seconds if self.seconds > 0 else 0.0

    def line(self) -> str:
        return (
            f"calls/s {self.calls_per_s:>8,.1f}  jobs/s {self.jobs_per_s:>9,.1f}  "
            f"p50 {self.p50_ms:7.2f} ms  p90 {self.p90_ms:7.2f} ms  p99 {self.p99_ms:7.2f} ms"
            f"  errors {self.errors}"
        )


def window_rates(window: Window, seconds: float) -> Rates:
    ordered = sorted(window.latencies)
    return Rates(
        seconds,
        window.calls,
        window.jobs,
        window.errors,
        percentile(ordered, 50) * 1000,
        percentile(ordered, 90) * 1000,
        percentile(ordered, 99) * 1000,
    )


class Stats:
    """Shared by the load threads; the reporter takes a window each second."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._window = Window()
        self.total = Histogram()
        self.calls = 0
        self.jobs = 0
        self.errors = 0
        self.error_kinds: dict[str, int] = {}
        self.acked_succeeded = 0
        self.acked_failed = 0

    def record(self, seconds: float, jobs: int) -> None:
        with self._lock:
            self._window.calls += 1
            self._window.jobs += jobs
            self._window.latencies.append(seconds)
            self.total.add(seconds)
            self.calls += 1
            self.jobs += jobs

    def error(self, exc: Exception) -> bool:
        """Count a failed call; True the first time this kind of error is seen."""
        kind = error_line(exc)
        with self._lock:
            self._window.errors += 1
            self.errors += 1
            first = kind not in self.error_kinds
            self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1
            return first

    def acked(self, succeeded: int, failed: int) -> None:
        with self._lock:
            self.acked_succeeded += succeeded
            self.acked_failed += failed

    def take_window(self) -> Window:
        with self._lock:
            window, self._window = self._window, Window()
            return window
