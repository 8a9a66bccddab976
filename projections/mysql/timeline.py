"""Reads of the job_events timeline and of a (replayed) queue as of a moment."""

from __future__ import annotations

from pinledger.ledger.state import JobState
from pinledger.projections.mysql import rows
from pinledger.projections.mysql.reads import MyReads
from pinledger.projections.store import DueJob, EventRow, StateCount, TimelineRow


class MyTimeline(MyReads):
    def timeline(self, queue: str, partition: int, local_id: int) -> list[TimelineRow]:
        params = {"queue": queue, "partition": partition, "local_id": local_id}
        found = self._all("reading a job's timeline", "job_timeline", params)
        return [rows.timeline(row) for row in found]

    def job_events(self, queue: str, partition: int, local_id: int) -> list[EventRow]:
        return [rows.event(local_id, row) for row in self.timeline(queue, partition, local_id)]

    def last_event_time(self, queue: str) -> int | None:
        found = self._all("reading the last event time", "last_event_time", {"queue": queue})
        return None if not found or found[0][0] is None else int(found[0][0])

    def counts_as_of(self, queue: str, now: int) -> list[StateCount]:
        params = {"queue": queue, "now": now}
        found = self._all("counting jobs as of a moment", "queue_counts_as_of", params)
        return [
            StateCount(JobState(state), priority, bool(future), int(n))
            for state, priority, future, n in found
        ]

    def due_in_dequeue_order(self, queue: str, now: int, limit: int) -> list[DueJob]:
        params = {"queue": queue, "now": now, "limit": limit}
        found = self._all("listing due jobs", "due_jobs_in_dequeue_order", params)
        return [DueJob(int(p), int(i), int(pr), int(r)) for p, i, pr, r in found]
