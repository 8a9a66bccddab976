"""Claim timeouts (River's rescuer, internal/maintenance/job_rescuer.go): a claim not
renewed within the claim timeout becomes a TimedOut record; the projection applies it
like any other event.

The expired claims are read from Postgres through an index (by last touch), a bounded
number per partition per run: an owner keeps no IN_PROGRESS job in memory
(docs/decisions/0014-ready-window.md), and a new owner times out the claims its
predecessor left. The decision itself is pure: `ledger.commands.decide_timeouts`,
handed `now`.

Locking: the partitions' lock is held while reading or marking an owned partition's
`timing_out`, never across a Postgres read or an append.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from pinledger.ledger.commands import decide_timeouts
from pinledger.ledger.descriptor import JobDescriptor
from pinledger.ledger.events import Actor, Event
from pinledger.ledger.log import LogError
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.store import HeldJob, StoreUnavailableError
from pinledger.service.observability import job_trace
from pinledger.service.observability.metrics import Metrics
from pinledger.service.ownership.partitions import Owned, Partitions
from pinledger.service.ownership.spans import job_span, naming

# At most this many claims are timed out per partition per run.
TIMEOUT_LIMIT = 5000


def timed_out(
    lock: threading.Lock,
    parts: Sequence[Owned],
    now: int,
    timeout_ms: int,
    limit: int = TIMEOUT_LIMIT,
    paused: Callable[[Owned, StoreUnavailableError], bool] = lambda _, __: False,
) -> list[tuple[Owned, list[HeldJob]]]:
    """The claims of serving partitions not renewed within `timeout_ms` whose timeout
    has not been appended yet, by partition (at most `limit` each), read from the
    store. Marks them as timing out (so the next run does not append them again); a
    mark goes once the store no longer shows the claim expired (its timeout projected).
    A partition whose store shard does not answer is left out when `paused` takes it
    (Partitions.pause), else the error is the caller's."""
    batches: list[tuple[Owned, list[HeldJob]]] = []
    for owned in parts:
        if not owned.serving:
            continue
        with lock:
            pending = len(owned.timing_out)
        try:
            found = owned.store.expired_claims(
                owned.queue, owned.partition, now - timeout_ms, limit + pending
            )
        except StoreUnavailableError as exc:
            if paused(owned, exc):
                continue
            raise
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
            partitions.lock,
            partitions.working(),
            now,
            timeout_ms,
            paused=lambda owned, exc: partitions.pause((owned.topic, owned.partition), exc),
        )
        appends: list[tuple[str, int, Sequence[Event]]] = [
            (owned.queue, owned.partition, decide_timeouts((h.job for h in held), now, timeout_ms))
            for owned, held in batches
        ]
        if not appends:
            return 0
        with job_span(
            "pinledger timeout",
            (
                job_trace.job_traceparent(
                    h.traceparent,
                    str(JobDescriptor(o.queue, o.partition, h.job.priority, h.job.local_id)),
                )
                for o, held in batches
                for h in held
            ),
            lambda: _timeout_attributes(batches),
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


def _timeout_attributes(batches: Sequence[tuple[Owned, Sequence[HeldJob]]]) -> dict[str, Any]:
    """Which queues and jobs a timeout span covers."""
    queues = sorted({owned.queue for owned, _ in batches})
    jobs = [
        JobDescriptor(owned.queue, owned.partition, h.job.priority, h.job.local_id)
        for owned, held in batches
        for h in held
    ]
    attributes: dict[str, Any] = {"pinledger.jobs": len(jobs), "pinledger.queues": queues}
    if len(queues) == 1:
        attributes["pinledger.queue"] = queues[0]
    return {**attributes, **naming(jobs)}
