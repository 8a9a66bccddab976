"""Small measuring helpers: percentiles, rates and a progress line."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Sequence
from types import TracebackType


def percentile(samples: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of `samples` (NaN when empty)."""
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    rank = min(len(ordered) - 1, max(0, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[rank]


class Progress:
    """Prints `label: done/total (rate/s)` to stderr every second while a phase runs,
    so a long run shows it is alive; `done` is read from a callable."""

    def __init__(self, label: str, total: int, done: Callable[[], int]) -> None:
        self.label = label
        self.total = total
        self.done = done
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="bench-progress")
        self._started = time.monotonic()

    def __enter__(self) -> Progress:
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        self._line(final=True)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self._line(final=False)

    def _line(self, final: bool) -> None:
        done = self.done()
        elapsed = max(time.monotonic() - self._started, 1e-9)
        end = "\n" if final else "\r"
        count = f"{done:,}/{self.total:,}" if self.total > 0 else f"{done:,}"
        sys.stderr.write(
            f"  {self.label}: {count} ({done / elapsed:,.0f}/s, {elapsed:.1f}s)   {end}"
        )
        sys.stderr.flush()


class Counter:
    """A thread-safe running total."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.value = 0

    def add(self, amount: int) -> None:
        with self._lock:
            self.value += amount

    def get(self) -> int:
        return self.value
