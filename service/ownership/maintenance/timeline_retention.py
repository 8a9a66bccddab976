"""The timeline's retention: its day partitions (projections/day_partitions.py)
created ahead of the clock, and those past the history retention
(PINLEDGER_HISTORY_RETENTION_DAYS; 0 keeps them forever) dropped whole.

It runs on a thread of its own, not on the owner thread: its DDL waits on job_events'
locks (briefly, and up to a lock timeout), and the owner thread serves dequeues. Every
server runs it; the store makes concurrent runs safe (creation takes an advisory lock,
a partition already created or dropped is left alone), so no server is special. The
thread survives every error and tries again with a backoff.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from pinledger.ledger.clock import Clock
from pinledger.projections.day_partitions import ahead_of, retention_cutoff
from pinledger.projections.store import DayPartitionStore
from pinledger.service.observability.log_limit import RateLimitedLog

log = logging.getLogger(__name__)

# How often partitions are made ahead and old ones dropped (they are days long).
RETENTION_EVERY_S = 600.0
# After a failure: 1 s, doubling up to the interval.
FIRST_RETRY_S = 1.0


@dataclass(frozen=True, slots=True)
class RetentionPass:
    created: int
    dropped: int


class TimelineRetention:
    """One pass of the lifecycle at the clock's time."""

    def __init__(self, store: DayPartitionStore, clock: Clock, retention_days: float) -> None:
        self.store = store
        self.clock = clock
        self.retention_days = retention_days

    def run(self) -> RetentionPass:
        now = self.clock.now_ms()
        created = self.store.ensure_day_partitions(*ahead_of(now))
        cutoff = retention_cutoff(now, self.retention_days)
        dropped = 0 if cutoff is None else self.store.drop_day_partitions_before(cutoff)
        if created or dropped:
            log.info(
                "timeline day partitions: %d created ahead, %d dropped past the retention",
                created,
                dropped,
            )
        return RetentionPass(created, dropped)


class RetentionThread:
    """Runs `keeper` at once, then every RETENTION_EVERY_S until `stop` is set; after a
    failure, sooner (backing off from FIRST_RETRY_S)."""

    def __init__(
        self,
        keeper: TimelineRetention,
        stop: threading.Event,
        clock: Clock,
        every_s: float = RETENTION_EVERY_S,
    ) -> None:
        self.keeper = keeper
        self._stop = stop
        self._clock = clock
        self.every_s = every_s
        self.failures_in_a_row = 0
        self._failures = RateLimitedLog(log, burst=3, window_s=600.0, clock=clock)
        self.thread = threading.Thread(target=self._run, name="timeline-retention", daemon=True)

    def pause_after(self, failed: bool) -> float:
        """How long to wait before the next pass."""
        if not failed:
            self.failures_in_a_row = 0
            return self.every_s
        pause: float = min(FIRST_RETRY_S * 2.0**self.failures_in_a_row, self.every_s)
        self.failures_in_a_row += 1
        return pause

    def run_once(self) -> bool:
        """One pass; False when it failed (logged, rate limited)."""
        try:
            self.keeper.run()
        except Exception as exc:
            # The thread must outlive any error of the store's: the next pass retries.
            self._failures.warning(
                "timeline day partitions pass failed: %s: %s", type(exc).__name__, exc
            )
            return False
        return True

    def _run(self) -> None:
        while True:
            pause = self.pause_after(not self.run_once())
            if self._clock.sleep(pause, self._stop):
                return
