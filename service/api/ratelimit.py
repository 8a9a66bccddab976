"""Per-queue dequeue rate limits with PinLater's semantics.

A queue's maxJobsPerSecond is for the whole cluster. Each job is charged once, by the
server that claims it (the owner of its partition), whichever server the worker called:
a dequeue charges the jobs it claimed from this server's partitions, and a forwarded
one (dequeueOwned) is limited and charged at the owner, so calling dequeueOwned directly
bypasses nothing. Each server's share is the fraction of the queue's partitions it owns
(`set_shares`, from the owners' group), so the shares add up to the rate however the
partitions and the workers are spread; a server owning none of them claims none of its
jobs, and its limiter only holds a paused queue's dequeues back. 0 pauses the queue:
every dequeue is refused. Fractional rates work (0.5 = one job every 2 s). Queues
without a rate are unlimited.

A dequeue asks `allow` before it runs and `charge`s the jobs it actually claimed. Like
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
        # maxJobsPerSecond by queue (the queue config), and this server's share of each
        # queue's partitions (the owners' group; a queue not listed: 1, this server
        # alone as far as it knows).
        self._rates: dict[str, float] = {}
        self._shares: dict[str, float] = {}

    def set_rates(self, rates: Mapping[str, float]) -> None:
        """The queue config's rates, cluster-wide."""
        with self._lock:
            self._rates = dict(rates)
            self._apply()

    def set_shares(self, shares: Mapping[str, float]) -> None:
        """The fraction of each queue's partitions this server owns (0 to 1)."""
        with self._lock:
            self._shares = dict(shares)
            self._apply()

    def _apply(self) -> None:
        """Make each queue's limiter run at this server's share of its rate (lock held)."""
        limiters: dict[str, RateLimiter] = {}
        for queue, rate in self._rates.items():
            # Owning none of it: no job of it is charged here, the limiter only gates
            # (a paused queue); at the whole rate, it never refuses a running one.
            share = self._shares.get(queue) or 1.0
            own = max(0.0, rate) * min(share, 1.0)
            limiter = self._limiters.get(queue)
            if limiter is None:
                limiter = RateLimiter(own, self._clock)
            elif limiter.rate != own:
                limiter.set_rate(own)
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
