"""Retiring a queue's drained partitions (issue 24; decision 0030).

A resize to fewer partitions closes the ones past the count: they take no new jobs and
drain. Once every closed partition has held no job (its jobs dequeued, finished and
collected) for `after_s`, with nothing left in the log to project, the catalog's owner
records them retired (`PartitionsRetired`): owners stop working on them (no ready
window, no claim timeouts, no collection), dequeues and forwarding pass them by, and
counts do not wait for their projection. A resize that opens them again reopens them.

The wait covers a server whose queue directory had not seen the resize yet (it re-reads
the catalog every second) and could still enqueue to a closed partition. Should a job
turn up in a retired partition all the same, the check finds it and records the
retirement undone (`first` = the partition count): the partitions drain again, and
retire again once empty.

One server acts, the one that owns the catalog's partition (scope CATALOG_OWNER), on
each members tick (2 s), as queue_sizes.py does; a server that does not own it forgets
its waits (`stand_by`), so a new catalog owner starts its wait afresh.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from pinledger.ledger.clock import Clock
from pinledger.ledger.events import Actor
from pinledger.ledger.formats import FormatTooOldError
from pinledger.ledger.log import LogError
from pinledger.ledger.writer import LedgerWriter
from pinledger.projections.store import LedgerStore, QueueRow, StoreError
from pinledger.service.observability.log_limit import RateLimitedLog
from pinledger.service.ownership.maintenance.duty import Duty, Schedule, Scope
from pinledger.service.ownership.peers import MEMBERS_EVERY_S

log = logging.getLogger(__name__)

# How long a record this server appended may take to show in the catalog projection
# before the same record is appended again.
RECORDED_GRACE_S = 30.0


class Retirement(Duty):
    name = "retirement"
    scope = Scope.CATALOG_OWNER

    def __init__(
        self,
        writer: LedgerWriter,
        store: LedgerStore,
        queues: Callable[[], Iterable[QueueRow]],
        clock: Clock,
        actor: Actor,
        after_s: float,
    ) -> None:
        self.writer = writer
        self.store = store
        self.queues = queues
        self.clock = clock
        self.actor = actor
        self.after_s = after_s
        # Queue -> (its first closed partition, monotonic time since when all its
        # closed partitions were seen empty).
        self._empty_since: dict[str, tuple[int, float]] = {}
        # Queue -> (the `first` recorded, until when not to record it again: monotonic).
        self._recorded: dict[str, tuple[int, float]] = {}
        self._failures = RateLimitedLog(log, burst=3, window_s=600.0, clock=clock)
        self.schedule = Schedule(MEMBERS_EVERY_S)

    def stand_by(self) -> None:
        """Not the catalog's owner: what it saw drained is forgotten, so that it waits
        the whole `after_s` again should it own the catalog once more."""
        self._empty_since.clear()

    def run(self, now_ms: int) -> list[str]:
        """Retire what has drained (and undo a retirement a job came back to); the
        queues whose retirement changed now."""
        changed = []
        rows = list(self.queues())
        for gone in self._empty_since.keys() - {row.name for row in rows}:
            del self._empty_since[gone]
        for row in rows:
            try:
                if self._check(row):
                    changed.append(row.name)
            except (LogError, StoreError, FormatTooOldError) as exc:
                self._empty_since.pop(row.name, None)
                self._failures.warning(
                    "cannot check the closed partitions of queue %r (%s); checking again "
                    "on the next tick",
                    row.name,
                    exc,
                )
        return changed

    def _check(self, row: QueueRow) -> bool:
        if row.active < row.partitions and self.store.holds_jobs_from(row.name, row.active):
            self._empty_since.pop(row.name, None)
            if not self._record(
                row,
                row.partitions,
                f"a job turned up in retired partition(s) {row.active}..{row.partitions - 1}",
            ):
                return False
            log.warning(
                "queue %r: a job turned up in its retired partitions %d..%d (enqueued by a "
                "server that had not seen the resize yet); they drain again, and retire "
                "again once empty",
                row.name,
                row.active,
                row.partitions - 1,
            )
            return True
        first = row.open
        if first >= row.active or not self._drained(row, first):
            self._empty_since.pop(row.name, None)
            return False
        now = self.clock.monotonic()
        seen = self._empty_since.get(row.name)
        if seen is None or seen[0] != first:
            self._empty_since[row.name] = (first, now)
            return False
        if now - seen[1] < self.after_s:
            return False
        del self._empty_since[row.name]
        reason = f"partitions {first}..{row.partitions - 1} drained: empty for {self.after_s:g} s"
        if not self._record(row, first, reason):
            return False
        log.info(
            "queue %r: partitions %d..%d retired (closed by a resize, empty for %g s)",
            row.name,
            first,
            row.partitions - 1,
            self.after_s,
        )
        return True

    def _drained(self, row: QueueRow, first: int) -> bool:
        """Nothing in the closed partitions' log left to project, and then no job in
        them. In that order: a job projected after the look for jobs would be missed if
        the offsets were read last."""
        topic = self.writer.topic(row.name)
        keys = [(topic, p) for p in range(first, row.partitions)]
        ends = self.writer.log.end_offsets(keys)
        projected = self.store.offsets(keys)
        if any(projected.get(key, 0) < ends.get(key, 0) for key in keys):
            return False
        return not self.store.holds_jobs_from(row.name, first)

    def _record(self, row: QueueRow, first: int, reason: str) -> bool:
        """Append the record, unless this server did so already and the catalog
        projection has not caught up yet; whether it appended."""
        now = self.clock.monotonic()
        recorded = self._recorded.get(row.name)
        if recorded is not None and recorded[0] == first and recorded[1] > now:
            return False
        self.writer.retire_partitions(row.name, first, self.clock.now_ms(), self.actor, reason)
        self._recorded[row.name] = (first, now + RECORDED_GRACE_S)
        return True
