"""Partitions that adapt to each queue (issue 24, part 3; decision 0030).

A queue whose config says `"partitions": {"min": 1, "max": 32}` gets the count the
servers measure it needs, as Pinterest's Pacer does: the pure policy
(service/partition_policy.py) decides from one window of measurements, and the catalog's
owner appends the resize with the policy's reason, as `pinledger queue resize` would.

What a window measures, and where:

- the enqueue rate: jobs enqueued into the queue during the window, from the projected
  timeline (`event_buckets`: one index range), so every server's enqueues count;
- the due backlog: the queue's PENDING jobs due now, counted up to what the policy can
  use (`queue_tally`, capped: a few index ranges however deep the backlog);
- the dequeue calls and how many were answered empty: counted by each server for the
  calls it answers (`DequeueTally`). The server that decides uses its own, a sample of
  all calls when workers spread theirs over the servers, as PinLater's clients do. A
  server answering fewer than `minDequeues` calls in a window sees no shrink signal: the
  sample never shrinks a queue on too little evidence. Each server shows its own share
  in /metrics (`pinledger_queue_empty_dequeue_ratio`), and every call in
  `pinledger_dequeue_calls_total{answer}`, which sums over servers.

The cooldown since the last resize is read from the catalog (the record's time), so a
new catalog owner after a failover keeps it. A queue with a fixed `partitions`, or none,
never adapts: a one-partition (FIFO) queue keeps its order unless an operator asks.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pinledger.ledger.clock import Clock
from pinledger.ledger.codec import EVENT_TAGS
from pinledger.ledger.events import Actor, Enqueued, Envelope, QueueResized
from pinledger.ledger.formats import FormatTooOldError
from pinledger.ledger.log import LogError
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.catalog_log import catalog_envelopes, resizes
from pinledger.projections.store import LedgerStore, QueueRow, StoreError
from pinledger.service.observability import catalogue
from pinledger.service.observability.log_limit import RateLimitedLog
from pinledger.service.observability.metrics import Metrics
from pinledger.service.ownership.maintenance.duty import Duty, Schedule
from pinledger.service.ownership.peers import MEMBERS_EVERY_S
from pinledger.service.partition_policy import Measured, decide
from pinledger.service.queue_config import Adaptive, QueueConfig

log = logging.getLogger(__name__)

_ENQUEUED = EVENT_TAGS[Enqueued]


class DequeueTally:
    """Dequeue calls this server answered, and how many of them empty, per queue since
    the last `take` (any thread)."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self._lock = threading.Lock()
        self._calls: dict[str, tuple[int, int]] = {}

    def note(self, queue: str, jobs: int) -> None:
        with self._lock:
            calls, empty = self._calls.get(queue, (0, 0))
            self._calls[queue] = (calls + 1, empty + (jobs == 0))
        answer = "empty" if jobs == 0 else "jobs"
        self.metrics.count(catalogue.DEQUEUE_CALLS_TOTAL, queue=queue, answer=answer)

    def take(self, queue: str) -> tuple[int, int]:
        """(calls, empty ones) since the last take, and start again."""
        with self._lock:
            return self._calls.pop(queue, (0, 0))


@dataclass
class _Window:
    started: float  # monotonic
    started_ms: int


class Adaptation(Duty):
    """Every server closes its windows (its share of empty dequeue answers is its own);
    the catalog's owner alone measures and resizes (`owns_catalog`)."""

    name = "adaptation"

    def __init__(
        self,
        writer: LedgerWriter,
        store: LedgerStore,
        tally: DequeueTally,
        metrics: Metrics,
        owns_catalog: Callable[[], bool],
        config: Callable[[], QueueConfig],
        queues: Callable[[], Iterable[QueueRow]],
        clock: Clock,
        actor: Actor,
        max_priority: int,
    ) -> None:
        self.writer = writer
        self.store = store
        self.tally = tally
        self.metrics = metrics
        self.owns_catalog = owns_catalog
        self.config = config
        self.queues = queues
        self.clock = clock
        self.actor = actor
        self.max_priority = max_priority
        self._windows: dict[str, _Window] = {}
        self._failures = RateLimitedLog(log, burst=3, window_s=600.0, clock=clock)
        self.schedule = Schedule(MEMBERS_EVERY_S)

    def run(self, now_ms: int) -> list[str]:
        """Close the windows that are due: measure, show the share of empty dequeue
        answers, and on the catalog's owner resize what the policy asks to. The queues
        resized now."""
        config = self.config()
        now = self.clock.monotonic()
        due: list[tuple[QueueRow, Adaptive, _Window]] = []
        adaptive = set()
        for row in self.queues():
            settings = config.settings(row.name).adaptive
            if settings is None:
                continue
            adaptive.add(row.name)
            window = self._windows.get(row.name)
            if window is None:
                self._start(row.name)
            elif now - window.started >= settings.window_s:
                due.append((row, settings, window))
        for gone in self._windows.keys() - adaptive:
            del self._windows[gone]
        if not due:
            return []
        resized = []
        envelopes = None
        for row, settings, window in due:
            calls, empty = self.tally.take(row.name)
            self._windows[row.name] = _Window(now, self.clock.now_ms())
            if calls:
                self.metrics.set_gauge(
                    catalogue.QUEUE_EMPTY_DEQUEUE_RATIO, empty / calls, queue=row.name
                )
            if not self.owns_catalog():
                continue
            try:
                measured = self._measure(row, settings, window, calls, empty)
                if envelopes is None:
                    envelopes = catalog_envelopes(self.writer.log, self.writer.prefix)
                change = decide(
                    row.open,
                    settings.bounds,
                    measured,
                    _since_last_resize(envelopes, row.name, self.clock.now_ms()),
                    settings.thresholds,
                )
                if change is None:
                    continue
                self.writer.resize_queue(
                    row.name, change.partitions, self.clock.now_ms(), self.actor, change.reason
                )
            except (LogError, StoreError, FormatTooOldError) as exc:
                self._failures.warning(
                    "cannot adapt the partitions of queue %r (%s); measuring again", row.name, exc
                )
                continue
            log.info(
                "queue %r resized from %d to %d partitions: %s",
                row.name,
                row.open,
                change.partitions,
                change.reason,
            )
            resized.append(row.name)
        return resized

    def _start(self, queue: str) -> None:
        self._windows[queue] = _Window(self.clock.monotonic(), self.clock.now_ms())
        self.tally.take(queue)  # what came before the window is not in it

    def _measure(
        self, row: QueueRow, settings: Adaptive, window: _Window, calls: int, empty: int
    ) -> Measured:
        now_ms = self.clock.now_ms()
        span_ms = max(now_ms - window.started_ms, 1)
        enqueued = sum(
            b.events
            for b in self.store.event_buckets(
                row.name, [_ENQUEUED], window.started_ms, now_ms, span_ms + 1
            )
        )
        # Enough to see any backlog the policy acts on, however deep the queue is.
        cap = settings.thresholds.grow_backlog * settings.bounds.max + 1
        backlog = self.store.queue_tally(row.name, now_ms, self.max_priority, cap).pending_due
        return Measured(
            enqueue_rate=enqueued * 1000 / span_ms,
            due_backlog=backlog,
            dequeues=calls,
            empty_dequeues=empty,
        )


def _since_last_resize(envelopes: list[Envelope], queue: str, now_ms: int) -> float | None:
    """Seconds since the queue's last resize (None: never resized)."""
    found = [c.envelope for c in resizes(envelopes, queue) if isinstance(c.event, QueueResized)]
    return None if not found else (now_ms - found[-1].at) / 1000
