"""When the owner thread's maintenance duties run: claim timeouts every second,
garbage collection every PINLEDGER_GC_INTERVAL_S, each on the injected clock."""

from __future__ import annotations

from pinledger.ledger.clock import Clock
from pinledger.service.ownership.maintenance.claim_timeouts import ClaimTimeouts
from pinledger.service.ownership.maintenance.garbage_collection import Collector

# How often the claim timeouts are checked (garbage collection: config.gc_interval_s).
TIMEOUT_EVERY_S = 1.0


class Every:
    """A schedule on monotonic seconds: `due(now)` is true (and restarts the interval)
    once `seconds` have passed since the last time it was; at once when `last` is None."""

    def __init__(self, seconds: float, last: float | None = None) -> None:
        self.seconds = seconds
        self.last = last

    def due(self, now: float) -> bool:
        if self.last is not None and now - self.last < self.seconds:
            return False
        self.last = now
        return True


class Maintenance:
    """Runs each maintenance service when its interval has passed (owner thread, once
    per pass of the loop). Claim timeouts run at once; collection after its first
    interval."""

    def __init__(
        self, clock: Clock, timeouts: ClaimTimeouts, collector: Collector, gc_interval_s: float
    ) -> None:
        self.clock = clock
        self.timeouts = timeouts
        self.collector = collector
        self._timeouts_every = Every(TIMEOUT_EVERY_S)
        self._gc_every = Every(gc_interval_s, last=clock.monotonic())

    def run_due(self) -> None:
        now = self.clock.monotonic()
        if self._timeouts_every.due(now):
            self.timeouts.run(self.clock.now_ms())
        if self._gc_every.due(now):
            self.collector.run(self.clock.now_ms())
