"""Garbage collection (River's cleaner, internal/maintenance/job_cleaner.go): a
finished job past its TTL (PINLEDGER_SUCCEEDED_TTL_S, PINLEDGER_FAILED_TTL_S) becomes a
Collected record.

The finished jobs are read from Postgres through an index (by age), a bounded number
per partition per run: an owner keeps no finished job in memory
(docs/decisions/0014-ready-window.md). The decision itself is pure:
`ledger.commands.decide_collect`, handed `now`.
"""

from __future__ import annotations

from collections.abc import Sequence

from pinledger.ledger.commands import decide_collect
from pinledger.ledger.events import Actor, Event
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.store import StoreUnavailableError
from pinledger.service.observability import catalogue
from pinledger.service.observability.metrics import Metrics
from pinledger.service.ownership.maintenance.duty import Duty, Schedule
from pinledger.service.ownership.partitions import Partitions

# At most this many finished jobs are collected per partition per run.
COLLECT_LIMIT = 5000


def gc_cutoffs(now: int, succeeded_ttl_ms: int, failed_ttl_ms: int) -> tuple[int, int]:
    """Finished jobs last updated at or before these (succeeded, failed) times are due
    for collection."""
    return now - succeeded_ttl_ms, now - failed_ttl_ms


class Collector(Duty):
    """Appends Collected for finished jobs past their TTL in serving partitions, every
    PINLEDGER_GC_INTERVAL_S from one interval after the owner starts (every server, for
    its partitions, on the owner thread: `Partitions.pause` drops a partition)."""

    name = "garbage-collection"

    def __init__(
        self,
        partitions: Partitions,
        writer: LedgerWriter,
        metrics: Metrics,
        actor: Actor,
        succeeded_ttl_s: float,
        failed_ttl_s: float,
        gc_interval_s: float,
    ) -> None:
        self.partitions = partitions
        self.writer = writer
        self.metrics = metrics
        self.actor = actor
        self.succeeded_ttl_ms = int(succeeded_ttl_s * 1000)
        self.failed_ttl_ms = int(failed_ttl_s * 1000)
        self.schedule = Schedule(gc_interval_s)

    def run(self, now: int, limit: int = COLLECT_LIMIT) -> int:
        """Append the collections due at `now`; the number of jobs collected."""
        succeeded_ttl, failed_ttl = self.succeeded_ttl_ms, self.failed_ttl_ms
        succeeded_before, failed_before = gc_cutoffs(now, succeeded_ttl, failed_ttl)
        appends: list[tuple[str, int, Sequence[Event]]] = []
        for owned in self.partitions.working():
            try:
                jobs = owned.store.expired(
                    owned.queue, owned.partition, succeeded_before, failed_before, limit
                )
            except StoreUnavailableError as exc:
                if self.partitions.pause((owned.topic, owned.partition), exc):
                    continue  # its shard is down: collected once it is back
                raise
            collected = decide_collect(jobs, now, succeeded_ttl, failed_ttl)
            if collected:
                appends.append((owned.queue, owned.partition, collected))
        if appends:
            self.writer.append_many(appends, now, self.actor)
        for queue, _, events in appends:
            self.metrics.count(catalogue.JOBS_TOTAL, len(events), queue=queue, action="gc")
        return sum(len(events) for _, _, events in appends)
