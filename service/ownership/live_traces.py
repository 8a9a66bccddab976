"""A traced job's life in the trace viewer as it happens: when the owner's projection
applies an event that ends one of the job's attempts (an ack, a failure, a timeout, a
release, a delete), the attempt's span goes out; when the job itself ends, its span,
the trace's root (docs/decisions/0028-a-trace-per-job.md).

Spans are built from the job's history (its timeline rows) by trace_export.py, the
same code as `pinledger trace --otlp`, so the live spans and an export after the fact
are the same spans with the same ids. The history is read on a thread of its own, a
moment after the projection told us (the observer runs just before the batch
commits); a read that does not show the end yet is tried again a few times.

Only jobs whose enqueue was traced and sampled, and only while tracing is on. The
queue of jobs to export is bounded (PINLEDGER_TRACE_QUEUE); beyond it a job's spans
are dropped and counted, never the owner slowed. The thread survives any error of the
store or the exporter.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from opentelemetry.sdk.trace import ReadableSpan

from pinledger import otel
from pinledger.ledger.descriptor import JobDescriptor
from pinledger.ledger.outcome import classify
from pinledger.ledger.state import FINISHED
from pinledger.projections.history import JobHistory, build_history
from pinledger.projections.projector import Transition
from pinledger.projections.store import EventRow
from pinledger.service.observability import catalogue, job_trace, trace_export
from pinledger.service.observability.log_limit import RateLimitedLog
from pinledger.service.observability.metrics import Metrics

log = logging.getLogger(__name__)

# The projection commits within milliseconds of telling the observer; a history read
# this much later nearly always shows the end. A read that does not is tried again.
FIRST_READ_S = 0.2
RETRY_S = 1.0
READS = 5


class TimelineReader(Protocol):
    def job_events(self, queue: str, partition: int, local_id: int) -> list[EventRow]: ...


@dataclass(frozen=True, slots=True)
class Ended:
    """What ended for one job in one projected batch."""

    descriptor: JobDescriptor
    claims: frozenset[str]  # the attempts that ended, by claim
    job: bool  # the job ended (SUCCEEDED, FAILED, removed)
    due: float  # monotonic seconds: when to read its history
    reads: int = 0


def ended(
    queue: str,
    partition: int,
    transitions: Sequence[Transition],
    traceparents: Mapping[int, str],
    due: float,
) -> list[Ended]:
    """The traced jobs of a batch whose attempt or life ended in it."""
    found: dict[int, tuple[JobDescriptor, set[str], bool]] = {}
    for t in transitions:
        if not t.verdict.applied:
            continue
        before, after = t.before, t.after
        # The job's life ends: it reached SUCCEEDED or FAILED, or was deleted before
        # that. Not the garbage collection of a finished job: its span went out at
        # the end, and sending it again (with one more step) would show two versions.
        finished = (after is None or after.state in FINISHED) and (
            before is not None and before.state not in FINISHED
        )
        end = classify(
            type(t.event),
            None if before is None else before.state,
            None if after is None else after.state,
            True,
        ).attempt_end
        if end is None and not finished:
            continue
        if not job_trace.sampled(traceparents.get(t.local_id)):
            continue
        job = after or before
        assert job is not None
        entry = found.setdefault(
            t.local_id,
            (JobDescriptor(queue, partition, job.priority, t.local_id), set(), False),
        )
        if end is not None and before is not None and before.claim:
            entry[1].add(before.claim)
        if finished:
            found[t.local_id] = (entry[0], entry[1], True)
    return [Ended(d, frozenset(claims), job, due) for d, claims, job in found.values()]


def spans_to_send(history: JobHistory, item: Ended, service_name: str) -> list[ReadableSpan] | None:
    """The spans of what ended, built from the job's history; None when the history
    does not show it yet (the batch has not committed)."""
    attempts = {a.claim: a for a in history.attempts}
    if any(c not in attempts or attempts[c].ended_at is None for c in item.claims):
        return None
    if item.job and not (history.job is None or history.job.state in FINISHED):
        return None
    spans = trace_export.build_spans(history, service_name)
    wanted = {f"attempt {attempts[c].number}" for c in item.claims}
    picked = [s for s in spans[1:] if s.name in wanted]
    return ([spans[0]] if item.job else []) + picked


class LiveTraces:
    def __init__(
        self,
        store: TimelineReader,
        metrics: Metrics,
        capacity: int,
        stop: threading.Event,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.capacity = capacity
        self._stop = stop
        self._clock = clock
        self._pending: deque[Ended] = deque()
        self._wake = threading.Condition()
        self._failures = RateLimitedLog(log, burst=3, window_s=600.0)
        self.service_name = os.environ.get("OTEL_SERVICE_NAME") or "pinledger"
        self.thread = threading.Thread(target=self._run, name="live-traces", daemon=True)

    def observe(
        self,
        queue: str,
        partition: int,
        transitions: Sequence[Transition],
        traceparents: Mapping[int, str],
    ) -> None:
        """The owner's observer: note the traced jobs whose attempts or lives ended
        (call only while tracing is on)."""
        items = ended(queue, partition, transitions, traceparents, self._clock() + FIRST_READ_S)
        if not items:
            return
        with self._wake:
            kept = items[: max(self.capacity - len(self._pending), 0)]
            self._pending.extend(kept)
            self._wake.notify()
        if len(kept) < len(items):
            self.metrics.count(
                catalogue.LIVE_TRACES_TOTAL, len(items) - len(kept), outcome="dropped"
            )

    def wake(self) -> None:
        """End the thread's pause at once: the server is stopping (the stop event is set)
        and waits for the thread, which would otherwise sleep out up to a second."""
        with self._wake:
            self._wake.notify_all()

    def drain(self) -> None:
        """Export what is noted, due or not, once (the server stops: its last acks'
        spans should not wait for a successor that will not send them)."""
        self.run_once(now=float("inf"), retry=False)

    def run_once(self, now: float | None = None, retry: bool = True) -> int:
        """Export the jobs whose reading time has come; how many were sent."""
        now = self._clock() if now is None else now
        with self._wake:
            due = [i for i in self._pending if i.due <= now]
            if not due:
                return 0
            later = [i for i in self._pending if i.due > now]
            self._pending = deque(later)
        sent = 0
        for item in due:
            sent += self._export(item, retry)
        return sent

    def _export(self, item: Ended, retry: bool) -> int:
        d = item.descriptor
        try:
            history = build_history(d, self.store.job_events(d.queue, d.partition, d.local_id))
            if not history.steps:  # its timeline rows are gone (retention)
                self.metrics.count(catalogue.LIVE_TRACES_TOTAL, outcome="no_history")
                return 0
            spans = spans_to_send(history, item, self.service_name)
        except Exception as exc:
            # The store may be down for a while: try this job again, as if unread.
            self._failures.warning(
                "live trace of job %s: reading its history failed (read %d of %d): %s: %s",
                d,
                item.reads + 1,
                READS,
                type(exc).__name__,
                exc,
            )
            spans = None
        if spans is None:
            if not retry or item.reads + 1 >= READS:
                self.metrics.count(catalogue.LIVE_TRACES_TOTAL, outcome="gave_up")
                return 0
            again = Ended(d, item.claims, item.job, self._clock() + RETRY_S, item.reads + 1)
            with self._wake:
                self._pending.append(again)
            return 0
        otel.send(spans)
        self.metrics.count(catalogue.LIVE_TRACES_TOTAL, outcome="exported")
        return 1

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
            except Exception as exc:  # never end the thread: the next pass goes on
                self._failures.warning("live traces pass failed: %s: %s", type(exc).__name__, exc)
            with self._wake:
                # Under the lock `wake` takes: a stop set before this check is seen, one
                # set after it wakes the wait.
                if self._stop.is_set():
                    break
                nearest = min((i.due for i in self._pending), default=None)
                wait = 1.0 if nearest is None else max(0.0, min(1.0, nearest - self._clock()))
                self._wake.wait(wait)
