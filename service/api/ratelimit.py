"""Per-queue dequeue rate limits with PinLater's semantics.

A queue's maxJobsPerSecond is for the whole cluster; each live server enforces its share,
rate / live_servers. 0 pauses the queue: every dequeue is refused. Fractional rates work
(0.5 = one job every 2 s). Queues without a rate are unlimited.

A dequeue asks `allow` before it runs and `charge`s the jobs it actually handed out. Like
Guava's RateLimiter, which PinLater used, a batch is never cut short: a big one puts the
limiter into debt and later dequeues are refused until the debt is worked off. So over any
span of t seconds a server hands out at most rate*t + burst jobs, plus the excess of the
last batch, where burst = max(1, rate) lets a worker polling steadily at the rate through.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from pinledger.ledger.clock import SYSTEM_CLOCK

# Float sums of clock steps land a hair under a whole permit (0.1 * 10 < 1.0); without
# this a worker polling exactly at the rate would be refused now and then.
_EPSILON = 1e-9


class RateLimiter:
    """One queue on one server. Not thread-safe; QueueRateLimits locks around it."""

    def __init__(self, rate: float, clock: Callable[[], float] = SYSTEM_CLOCK.monotonic) -> None:
        self._clock = clock
        self._rate = max(0.0, rate)
        # A fresh limiter starts with a full burst: a server that just started (or just
        # learned the queue's rate) may serve at once.
        self._permits = self._burst()
        self._last = clock()

    @property
    def rate(self) -> float:
        return self._rate

    def allow(self) -> bool:
        if self._rate == 0:
            return False
        self._refill()
        return self._permits >= 1 - _EPSILON

    def charge(self, jobs: int) -> None:
        if jobs < 0:
            raise ValueError(f"cannot charge {jobs} jobs")
        self._refill()
        self._permits -= jobs

    def set_rate(self, rate: float) -> None:
        """Change the rate but keep the debt, so a rebalance (a server joining or leaving)
        does not wipe out what a big batch owes."""
        self._refill()
        self._rate = max(0.0, rate)
        self._permits = min(self._permits, self._burst())

    def _burst(self) -> float:
        return max(1.0, self._rate)

    def _refill(self) -> None:
        now = self._clock()
        elapsed = max(0.0, now - self._last)  # never refund time if a clock steps back
        self._last = max(self._last, now)
        self._permits = min(self._burst(), self._permits + elapsed * self._rate)


class QueueRateLimits:
    """Every queue's limiter on this server. Thread-safe. allow and charge are separate
    calls, so two concurrent dequeues may both be allowed; the second batch is then
    debt, which later dequeues pay off, so the long-run rate still holds."""

    def __init__(self, clock: Callable[[], float] = SYSTEM_CLOCK.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._limiters: dict[str, RateLimiter] = {}

    def configure(self, rates: Mapping[str, float], live_servers: int) -> None:
        servers = max(1, live_servers)
        with self._lock:
            limiters: dict[str, RateLimiter] = {}
            for queue, rate in rates.items():
                share = max(0.0, rate) / servers
                limiter = self._limiters.get(queue)
                if limiter is None:
                    limiter = RateLimiter(share, self._clock)
                elif limiter.rate != share:
                    limiter.set_rate(share)
                limiters[queue] = limiter
            self._limiters = limiters

    def allow(self, queue: str) -> bool:
        with self._lock:
            limiter = self._limiters.get(queue)
            return limiter is None or limiter.allow()

    def charge(self, queue: str, jobs: int) -> None:
        with self._lock:
            limiter = self._limiters.get(queue)
            if limiter is not None:
                limiter.charge(jobs)

    def rate(self, queue: str) -> float | None:
        with self._lock:
            limiter = self._limiters.get(queue)
            return None if limiter is None else limiter.rate
