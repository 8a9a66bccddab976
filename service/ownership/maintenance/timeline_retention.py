"""The timeline's retention: its day partitions (projections/day_partitions.py)
created ahead of the clock, and those past the history retention
(PINLEDGER_HISTORY_RETENTION_DAYS; 0 keeps them forever) dropped whole.

It runs in a lane of its own (scheduler.py), not on the owner thread: its DDL waits on
job_events' locks (briefly, and up to a lock timeout), and the owner thread serves
dequeues; nor beside the members' duties, which it would hold up as long. Every server
runs it; the store makes concurrent runs safe (creation takes an advisory lock, a
partition already created or dropped is left alone), so no server is special. It runs
at once, then every RETENTION_EVERY_S; after a failure sooner, from FIRST_RETRY_S
doubling up to the interval.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pinledger.projections.day_partitions import ahead_of, retention_cutoff
from pinledger.projections.store import DayPartitionStore
from pinledger.service.ownership.maintenance.duty import Duty, Schedule

log = logging.getLogger(__name__)

# How often partitions are made ahead and old ones dropped (they are days long).
RETENTION_EVERY_S = 600.0
# After a failure: 1 s, doubling up to the interval.
FIRST_RETRY_S = 1.0


@dataclass(frozen=True, slots=True)
class RetentionPass:
    created: int
    dropped: int


class TimelineRetention(Duty):
    """One pass of the lifecycle at the time it is handed."""

    name = "timeline-retention"

    def __init__(
        self, store: DayPartitionStore, retention_days: float, every_s: float = RETENTION_EVERY_S
    ) -> None:
        self.store = store
        self.retention_days = retention_days
        self.schedule = Schedule(every_s, at_once=True, retry_s=FIRST_RETRY_S)

    def run(self, now_ms: int) -> RetentionPass:
        created = self.store.ensure_day_partitions(*ahead_of(now_ms))
        cutoff = retention_cutoff(now_ms, self.retention_days)
        dropped = 0 if cutoff is None else self.store.drop_day_partitions_before(cutoff)
        if created or dropped:
            log.info(
                "timeline day partitions: %d created ahead, %d dropped past the retention",
                created,
                dropped,
            )
        return RetentionPass(created, dropped)
