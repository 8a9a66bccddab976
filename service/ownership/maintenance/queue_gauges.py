"""Each queue's jobs by state and the age of its oldest due job, as gauges.

    pinledger_queue_jobs{queue,state}             pending, later, running, succeeded,
                                                  failed: each count capped
    pinledger_queue_oldest_ready_seconds{queue}   now - the oldest due run_after, or 0

Read as the dashboard's overview reads them (decision 0029): `queue_tally` (a few
ranges of the jobs_by_state index, each count stopping at the cap) and `oldest_due`
(one index probe per priority), so a refresh costs at most
`queues x (3 + 2 x priorities) x cap` index entries, however deep the backlogs.

Who: these are cluster-wide numbers, the same whichever server reads them, so one server
reads them: the owner of the catalog partition (scope CATALOG_OWNER), every
PINLEDGER_QUEUE_METRICS_INTERVAL_S (0 turns them off), in a lane of its own (a read of
many queues must not hold up the members' duties). The cost is then paid once per
cluster, not once per server; a failover moves the catalog and the gauges with it, and
a server that no longer leads drops its series at its next turn (`stand_by`; for that
moment two servers may export them: dashboards aggregate with max). A queue whose store
does not answer has no series until it does: absent means unknown, never a stale
number.

State: its lane's alone.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from pinledger.ledger.clock import Clock
from pinledger.projections.store import LedgerStore, QueueTally, StoreError
from pinledger.service.observability import catalogue
from pinledger.service.observability.log_limit import RateLimitedLog
from pinledger.service.observability.metrics import Metrics
from pinledger.service.ownership.maintenance.duty import Duty, Schedule, Scope

log = logging.getLogger(__name__)

JOBS = catalogue.QUEUE_JOBS
OLDEST = catalogue.QUEUE_OLDEST_READY_SECONDS
# The `state` label of each QueueTally field: the dashboard overview's column names.
STATES: Mapping[str, str] = {
    "pending_due": "pending",
    "pending_future": "later",
    "running": "running",
    "succeeded": "succeeded",
    "failed": "failed",
}


class QueueGauges(Duty):
    name = "queue-gauges"
    scope = Scope.CATALOG_OWNER

    def __init__(
        self,
        store: LedgerStore,
        metrics: Metrics,
        clock: Clock,
        priorities: int,
        cap: int,
        every_s: float,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.clock = clock
        self.priorities = priorities
        self.cap = cap
        self._failures = RateLimitedLog(log, burst=3, window_s=600.0, clock=clock)
        self.schedule = Schedule(every_s)

    def stand_by(self) -> None:
        """Not the catalog's owner: no series (the catalog's owner exports them)."""
        self.metrics.replace_gauges(JOBS, [])
        self.metrics.replace_gauges(OLDEST, [])

    def run(self, now_ms: int) -> None:
        """Read every queue's numbers and replace the gauges with them (each queue's age
        measured when it is read)."""
        jobs: list[tuple[Mapping[str, str], float]] = []
        oldest: list[tuple[Mapping[str, str], float]] = []
        try:
            names = [row.name for row in self.store.queues()]
        except StoreError as exc:
            self._failures.warning("queue metrics not read: listing the queues failed: %s", exc)
            names = []
        for name in names:
            now = self.clock.now_ms()
            try:
                tally = self.store.queue_tally(name, now, self.priorities, self.cap)
                due = self.store.oldest_due(name, now, self.priorities)
            except StoreError as exc:
                self._failures.warning("queue metrics of %s not read: %s", name, exc)
                continue
            for field, count in zip(QueueTally._fields, tally, strict=True):
                jobs.append(({"queue": name, "state": STATES[field]}, float(count)))
            waited = 0.0 if due is None else max(0, now - due) / 1000
            oldest.append(({"queue": name}, waited))
        self.metrics.replace_gauges(JOBS, jobs)
        self.metrics.replace_gauges(OLDEST, oldest)
