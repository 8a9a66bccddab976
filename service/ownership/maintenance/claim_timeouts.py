"""Claim timeouts (River's rescuer, internal/maintenance/job_rescuer.go): a claim not
renewed within the claim timeout becomes a TimedOut record; the projection applies it
like any other event.

The expired claims are read from Postgres through an index (by last touch), a bounded
number per partition per run: an owner keeps no IN_PROGRESS job in memory
(docs/decisions/0014-ready-window.md), and a new owner times out the claims its
predecessor left. The decision itself is pure: `ledger.commands.decide_timeouts`,
handed `now`.

A claim's `touched_at` is stamped by the clock of whichever server took the call that
made or renewed it; the owner also goes by when it saw the claim touched, by its own
clock (ownership/sightings.py), so that a server whose clock lags cannot make it time
out a claim being heartbeated. The TimedOut event still carries the touched_at it was
decided on, and the state machine still checks it, so replay is unchanged.

Locking: the partitions' lock is held while reading or marking an owned partition's
`timing_out`, never across a Postgres read or an append.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from pinledger.ledger.commands import decide_timeouts
from pinledger.ledger.descriptor import JobDescriptor
from pinledger.ledger.events import Actor, Event
from pinledger.ledger.log import LogError
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.store import HeldJob, StoreUnavailableError
from pinledger.service.observability import catalogue, job_trace
from pinledger.service.observability.log_limit import RateLimitedLog
from pinledger.service.observability.metrics import Metrics
from pinledger.service.ownership.maintenance.duty import Duty, Schedule
from pinledger.service.ownership.partitions import Owned, Partitions
from pinledger.service.ownership.sightings import Sightings
from pinledger.service.ownership.spans import job_span, naming

log = logging.getLogger(__name__)

# How often the claim timeouts are checked: a claim times out within a second of its
# timeout (the owner thread, from its first pass on).
TIMEOUT_EVERY_S = 1.0
# At most this many claims are timed out per partition per run.
TIMEOUT_LIMIT = 5000
# The claims kept because this owner saw them touched lately: one line per partition
# and run, a few a minute.
_KEPT = RateLimitedLog(log, burst=3, window_s=60.0)


def timed_out(
    lock: threading.Lock,
    parts: Sequence[Owned],
    now: int,
    timeout_ms: int,
    limit: int = TIMEOUT_LIMIT,
    paused: Callable[[Owned, StoreUnavailableError], bool] = lambda _, __: False,
    seen_now: float | None = None,
) -> list[tuple[Owned, list[HeldJob]]]:
    """The claims of serving partitions not renewed within `timeout_ms` whose timeout
    has not been appended yet, by partition (at most `limit` each), read from the
    store. Marks them as timing out (so the next run does not append them again); a
    mark goes once the store no longer shows the claim expired (its timeout projected).
    A partition whose store shard does not answer is left out when `paused` takes it
    (Partitions.pause), else the error is the caller's. With `seen_now`, the owner's
    monotonic time, a claim this owner saw made or renewed within the timeout is kept
    whatever its touched_at says, and so is every claim of a partition assigned here
    within it (sightings.py)."""
    batches: list[tuple[Owned, list[HeldJob]]] = []
    for owned in parts:
        if not owned.serving:
            continue
        with lock:
            pending = len(owned.timing_out)
            recent = _recent(owned.sightings, seen_now, timeout_ms)
        if recent is None:
            continue  # assigned here lately: every claim has its full timeout still
        try:
            found = owned.store.expired_claims(
                owned.queue, owned.partition, now - timeout_ms, limit + pending + len(recent)
            )
        except StoreUnavailableError as exc:
            if paused(owned, exc):
                continue
            raise
        if recent:
            kept = [h for h in found if h.job.local_id in recent]
            if kept:
                _kept(owned, kept, now)
                found = [h for h in found if h.job.local_id not in recent]
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


def _recent(sightings: Sightings, seen_now: float | None, timeout_ms: int) -> set[int] | None:
    return set() if seen_now is None else sightings.recent(seen_now, timeout_ms)


def _kept(owned: Owned, kept: Sequence[HeldJob], now: int) -> None:
    oldest = min(h.job.touched_at or now for h in kept)
    _KEPT.warning(
        "%s[%d]: kept %d claim(s) whose last touch is stamped up to %.0f s ago, past the "
        "claim timeout, but which this owner saw made or renewed within it: the clock of "
        "the server that took their heartbeats lags (check NTP on every server), or this "
        "owner projects far behind the log",
        owned.topic,
        owned.partition,
        len(kept),
        (now - oldest) / 1000,
    )


class ClaimTimeouts(Duty):
    """Appends timeouts for claims not renewed within the claim timeout (every server,
    for its partitions, on the owner thread: `Partitions.pause` drops a partition)."""

    name = "claim-timeouts"

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
        self.schedule = Schedule(TIMEOUT_EVERY_S, at_once=True)

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
            seen_now=partitions.clock.monotonic(),
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
            self.metrics.count(catalogue.JOBS_TOTAL, len(events), queue=queue, action="timeout")
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
