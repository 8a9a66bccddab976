"""Metrics of what the ledger applied, derived from the owner's projection.

The RPC counters (`pinledger_jobs_total`) say what callers asked for; these say what
the state machine made of it, per queue, counted once (by the owner of the partition,
after the batch is committed). Everything is derived from each event's (before, after,
verdict) as `ledger.state.evolve` decided them, never re-decided here. The series
(`pinledger_ledger_jobs_total`, `_rejected_total`, `_queue_wait_seconds`,
`_run_seconds`) and what each outcome means are in the catalogue (catalogue.py).

Run time needs the claim's time, which a job does not carry: it is remembered per
claimed job from the Claimed event this owner applied. An attempt claimed before this
server took the partition over has no run time observed.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence

from pinledger.ledger.events import Claimed, JobEvent
from pinledger.ledger.outcome import AttemptEnd, classify
from pinledger.ledger.state import Job, JobState
from pinledger.projections.projector import Transition
from pinledger.service.observability import catalogue
from pinledger.service.observability.metrics import Metrics

JOBS = catalogue.LEDGER_JOBS_TOTAL
REJECTED = catalogue.LEDGER_REJECTED_TOTAL
QUEUE_WAIT = catalogue.LEDGER_QUEUE_WAIT_SECONDS
RUN = catalogue.LEDGER_RUN_SECONDS


_Labels = tuple[tuple[str, ...], str | None]
_LABELS: dict[tuple[type[JobEvent], JobState | None, JobState | None], _Labels] = {}


def _labels_of(kind: type[JobEvent], before: JobState | None, after: JobState | None) -> _Labels:
    """The outcome labels an applied transition counts under, and the run-time label of
    the attempt it ended (None if it ended none); both from the one classifier
    (ledger/outcome.py). Remembered: a pure function of a few dozen possible
    arguments, asked once per event the owner projects."""
    key = (kind, before, after)
    found = _LABELS.get(key)
    if found is None:
        c = classify(kind, before, after, True)
        ended: str | None = None
        if c.attempt_end is AttemptEnd.FAILED and c.requeued:
            ended = "retried"
        elif c.attempt_end is not None:
            ended = c.attempt_end.value
        found = _LABELS[key] = (tuple(o.value for o in c.outcomes), ended)
    return found


def _state(job: Job | None) -> JobState | None:
    return None if job is None else job.state


def outcomes(t: Transition) -> list[str]:
    """The outcome labels an applied transition counts under (empty when rejected)."""
    if not t.verdict.applied:
        return []
    return list(_labels_of(type(t.event), _state(t.before), _state(t.after))[0])


class LedgerMetrics:
    """Feeds `Metrics` from the transitions of the partitions this server owns."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self._claimed_at: dict[tuple[str, int, int], int] = {}
        self._lock = threading.Lock()

    def observe(self, queue: str, partition: int, transitions: Sequence[Transition]) -> None:
        # Counted and observed per batch, not per event: a batch holds up to thousands
        # of events, and each metric call takes the registry's lock.
        counts: Counter[tuple[str, str]] = Counter()
        waits: list[float] = []
        runs: dict[str, list[float]] = {}
        claimed_at = self._claimed_at
        with self._lock:  # in log order: a job may be claimed and acked twice in a batch
            for t in transitions:
                kind = type(t.event)
                if not t.verdict.applied:
                    counts[(REJECTED, kind.__name__)] += 1
                    continue
                before = t.before
                labels, ended = _labels_of(kind, _state(before), _state(t.after))
                for outcome in labels:
                    counts[(JOBS, outcome)] += 1
                key = (queue, partition, t.local_id)
                if kind is Claimed and before is not None:
                    waits.append(max(0, t.at - before.run_after) / 1000)
                    claimed_at[key] = t.at
                    continue
                if ended is not None:
                    claimed = claimed_at.pop(key, None)
                    if claimed is not None:
                        runs.setdefault(ended, []).append(max(0, t.at - claimed) / 1000)
        self.metrics.observe_many(QUEUE_WAIT, waits, queue=queue)
        for ended, seconds in runs.items():
            self.metrics.observe_many(RUN, seconds, queue=queue, outcome=ended)
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
