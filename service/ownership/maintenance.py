"""Maintenance of owned partitions, appended as events: claim timeouts and garbage
collection. Like River's maintenance services (internal/maintenance/job_rescuer.go,
job_cleaner.go), each is a service with one `run` that decides from the state and acts
through the log; here both run on the owner thread, on a schedule of the injected
clock, and only over partitions that serve (caught up, so their state is complete).

- `ClaimTimeouts` (River's rescuer): a claim not renewed within the claim timeout
  becomes a TimedOut record; the projection applies it like any other event.
- `Collector` (River's cleaner): a finished job past its TTL becomes a Collected record.

Both read the jobs they act on from Postgres through an index (expired claims by last
touch, finished jobs by age), a bounded number per partition per run: an owner keeps
no IN_PROGRESS or finished job in memory (docs/decisions/0014-ready-window.md), and a
new owner times out the claims its predecessor left. The decisions themselves are pure:
`ledger.commands.decide_timeouts` / `decide_collect`, handed `now`.

Locking: the partitions' lock is held while reading or marking an owned partition's
`timing_out`, never across a Postgres read or an append.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from pinledger.ledger.clock import Clock
from pinledger.ledger.commands import decide_collect, decide_timeouts
from pinledger.ledger.events import Actor, Event
from pinledger.ledger.log import LogError
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.store import HeldJob, LedgerStore, ProjectorStore
from pinledger.service.observability.metrics import Metrics
from pinledger.service.ownership.partitions import Owned, Partitions
from pinledger.service.ownership.spans import job_span

# How often the claim timeouts are checked (garbage collection: config.gc_interval_s).
TIMEOUT_EVERY_S = 1.0
# At most this many finished jobs are collected per partition per run.
COLLECT_LIMIT = 5000
# At most this many claims are timed out per partition per run.
TIMEOUT_LIMIT = 5000

Appends = list[tuple[str, int, Sequence[Event]]]


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


def timed_out(
    store: ProjectorStore,
    lock: threading.Lock,
    parts: Sequence[Owned],
    now: int,
    timeout_ms: int,
    limit: int = TIMEOUT_LIMIT,
) -> list[tuple[Owned, list[HeldJob]]]:
    """The claims of serving partitions not renewed within `timeout_ms` whose timeout
    has not been appended yet, by partition (at most `limit` each), read from the
    store. Marks them as timing out (so the next run does not append them again); a
    mark goes once the store no longer shows the claim expired (its timeout projected)."""
    batches: list[tuple[Owned, list[HeldJob]]] = []
    for owned in parts:
        if not owned.serving:
            continue
        with lock:
            pending = len(owned.timing_out)
        found = store.expired_claims(
            owned.queue, owned.partition, now - timeout_ms, limit + pending
        )
        shown = {(h.job.local_id, h.job.touched_at) for h in found}
        with lock:
            fresh = [
                h for h in found if (h.job.local_id, h.job.touched_at) not in owned.timing_out
            ][:limit]
            owned.timing_out = (owned.timing_out & shown) | {
                (h.job.local_id, h.job.touched_at) for h in fresh
            }
        if fresh:
            batches.append((owned, fresh))
    return batches


def gc_cutoffs(now: int, succeeded_ttl_ms: int, failed_ttl_ms: int) -> tuple[int, int]:
    """Finished jobs last updated at or before these (succeeded, failed) times are due
    for collection."""
    return now - succeeded_ttl_ms, now - failed_ttl_ms


class ClaimTimeouts:
    """Appends timeouts for claims not renewed within the claim timeout."""

    def __init__(
        self,
        partitions: Partitions,
        writer: LedgerWriter,
        metrics: Metrics,
        actor: Actor,
        claim_timeout_s: float,
    ) -> None:
        self.partitions = partitions
        self.writer = writer
        self.metrics = metrics
        self.actor = actor
        self.timeout_ms = int(claim_timeout_s * 1000)

    def run(self, now: int) -> int:
        """Append the timeouts due at `now`; the number of jobs timed out."""
        timeout_ms = self.timeout_ms
        partitions = self.partitions
        batches = timed_out(
            partitions.store, partitions.lock, partitions.serving(), now, timeout_ms
        )
        appends: Appends = [
            (owned.queue, owned.partition, decide_timeouts((h.job for h in held), now, timeout_ms))
            for owned, held in batches
        ]
        if not appends:
            return 0
        with job_span(
            "pinledger timeout",
            (h.traceparent for _, held in batches for h in held),
            {"pinledger.jobs": sum(len(held) for _, held in batches)},
            root=True,
        ) as traceparent:
            try:
                self.writer.append_many(appends, now, self.actor, traceparent)
            except LogError:
                # Not appended: let the next run try these claims again.
                with self.partitions.lock:
                    for owned, held in batches:
                        owned.timing_out -= {(h.job.local_id, h.job.touched_at) for h in held}
                raise
        count = 0
        for queue, _, events in appends:
            self.metrics.count("pinledger_jobs_total", len(events), queue=queue, action="timeout")
            count += len(events)
        return count


class Collector:
    """Appends Collected for finished jobs past their TTL in serving partitions."""

    def __init__(
        self,
        partitions: Partitions,
        store: LedgerStore,
        writer: LedgerWriter,
        metrics: Metrics,
        actor: Actor,
        succeeded_ttl_s: float,
        failed_ttl_s: float,
    ) -> None:
        self.partitions = partitions
        self.store = store
        self.writer = writer
        self.metrics = metrics
        self.actor = actor
        self.succeeded_ttl_ms = int(succeeded_ttl_s * 1000)
        self.failed_ttl_ms = int(failed_ttl_s * 1000)

    def run(self, now: int, limit: int = COLLECT_LIMIT) -> int:
        """Append the collections due at `now`; the number of jobs collected."""
        succeeded_ttl, failed_ttl = self.succeeded_ttl_ms, self.failed_ttl_ms
        succeeded_before, failed_before = gc_cutoffs(now, succeeded_ttl, failed_ttl)
        appends: Appends = []
        for owned in self.partitions.serving():
            jobs = self.store.expired(
                owned.queue, owned.partition, succeeded_before, failed_before, limit
            )
            collected = decide_collect(jobs, now, succeeded_ttl, failed_ttl)
            if collected:
                appends.append((owned.queue, owned.partition, collected))
        if appends:
            self.writer.append_many(appends, now, self.actor)
        for queue, _, events in appends:
            self.metrics.count("pinledger_jobs_total", len(events), queue=queue, action="gc")
        return sum(len(events) for _, _, events in appends)


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
