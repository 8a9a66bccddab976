"""Metrics of what the ledger applied, derived from the owner's projection.

The RPC counters (`pinledger_jobs_total`) say what callers asked for; these say what
the state machine made of it, per queue, counted once (by the owner of the partition,
after the batch is committed). Everything is derived from each event's (before, after,
verdict) as `ledger.state.evolve` decided them, never re-decided here:

    pinledger_ledger_jobs_total{queue,outcome}     counter    applied events, by outcome:
        enqueued, claimed, succeeded, failed (the job ended FAILED, by an ack or a
        timeout on its last attempt), retried (back to PENDING after a failure ack or a
        timeout with attempts left, or by retryFailedJobs), timed_out, checkpointed,
        released (a checkpoint moving the job back to PENDING), deleted, collected
    pinledger_ledger_rejected_total{queue,action}  counter    events the state machine
        rejected (a stale ack, a timeout a heartbeat overtook, ...), by event type
    pinledger_ledger_queue_wait_seconds{queue}     histogram  due (run_after) -> claim
    pinledger_ledger_run_seconds{queue,outcome}    histogram  claim -> end of the attempt
        (succeeded, failed, retried, timed_out, released, deleted)

Run time needs the claim's time, which a job does not carry: it is remembered per
claimed job from the Claimed event this owner applied. An attempt claimed before this
server took the partition over has no run time observed.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence

from pinledger.ledger.events import Claimed
from pinledger.ledger.outcome import AttemptEnd, classify
from pinledger.projections.projector import Transition
from pinledger.service.observability.metrics import Metrics

JOBS = "pinledger_ledger_jobs_total"
REJECTED = "pinledger_ledger_rejected_total"
QUEUE_WAIT = "pinledger_ledger_queue_wait_seconds"
RUN = "pinledger_ledger_run_seconds"


def _classified(t: Transition) -> tuple[list[str], str | None]:
    """The outcome labels an applied transition counts under (empty when rejected), and
    the run-time label of the attempt it ended (None if it ended none); both from the
    one classifier (ledger/outcome.py)."""
    before = None if t.before is None else t.before.state
    after = None if t.after is None else t.after.state
    c = classify(type(t.event), before, after, t.verdict.applied)
    ended: str | None = None
    if c.attempt_end is AttemptEnd.FAILED and c.requeued:
        ended = "retried"
    elif c.attempt_end is not None:
        ended = c.attempt_end.value
    return [o.value for o in c.outcomes], ended


def outcomes(t: Transition) -> list[str]:
    """The outcome labels an applied transition counts under (empty when rejected)."""
    return _classified(t)[0]


class LedgerMetrics:
    """Feeds `Metrics` from the transitions of the partitions this server owns."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self._claimed_at: dict[tuple[str, int, int], int] = {}
        self._lock = threading.Lock()

    def observe(self, queue: str, partition: int, transitions: Sequence[Transition]) -> None:
        # Counted per batch, not per event: a batch holds up to thousands of events.
        counts: Counter[tuple[str, str]] = Counter()
        for t in transitions:
            if not t.verdict.applied:
                counts[(REJECTED, type(t.event).__name__)] += 1
                continue
            labels, ended = _classified(t)
            for outcome in labels:
                counts[(JOBS, outcome)] += 1
            key = (queue, partition, t.local_id)
            if isinstance(t.event, Claimed) and t.before is not None:
                self.metrics.observe(
                    QUEUE_WAIT, max(0, t.at - t.before.run_after) / 1000, queue=queue
                )
                with self._lock:
                    self._claimed_at[key] = t.at
                continue
            if ended is not None:
                with self._lock:
                    claimed_at = self._claimed_at.pop(key, None)
                if claimed_at is not None:
                    self.metrics.observe(
                        RUN, max(0, t.at - claimed_at) / 1000, queue=queue, outcome=ended
                    )
        for (name, label), n in counts.items():
            if name == REJECTED:
                self.metrics.count(REJECTED, n, queue=queue, action=label)
            else:
                self.metrics.count(JOBS, n, queue=queue, outcome=label)

    def forget(self, queue: str, partition: int) -> None:
        """Drop the claim times of a partition this server no longer owns."""
        with self._lock:
            for key in [k for k in self._claimed_at if k[:2] == (queue, partition)]:
                del self._claimed_at[key]
