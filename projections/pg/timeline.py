"""Reads of the job_events timeline and of a (replayed) queue as of a moment."""

from __future__ import annotations

from pinledger.ledger.state import JobState
from pinledger.projections.pg import rows
from pinledger.projections.pg.connection import PgConnection
from pinledger.projections.pg.sql import query
from pinledger.projections.store import DueJob, EventRow, StateCount, TimelineRow


class PgTimeline(PgConnection):
    def timeline(self, queue: str, partition: int, local_id: int) -> list[TimelineRow]:
        with self.connection("reading a job's timeline") as conn:
            found = conn.execute(
                query("job_timeline"),
                {"queue": queue, "partition": partition, "local_id": local_id},
            ).fetchall()
        return [rows.timeline(row) for row in found]

    def job_events(self, queue: str, partition: int, local_id: int) -> list[EventRow]:
        """The job's timeline as rows, in log order (what projections/history.py reads)."""
        return [rows.event(local_id, row) for row in self.timeline(queue, partition, local_id)]

    def last_event_time(self, queue: str) -> int | None:
        with self.connection("reading the last event time") as conn:
            row = conn.execute(query("last_event_time"), {"queue": queue}).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def counts_as_of(self, queue: str, now: int) -> list[StateCount]:
        """(state, priority, future, count) of one queue; future: run_after > now."""
        with self.connection("counting jobs as of a moment") as conn:
            found = conn.execute(
                query("queue_counts_as_of"), {"queue": queue, "now": now}
            ).fetchall()
        return [
            StateCount(JobState(state), priority, future, n) for state, priority, future, n in found
        ]

    def due_in_dequeue_order(self, queue: str, now: int, limit: int) -> list[DueJob]:
        """PENDING jobs due at `now`, in the order a dequeue takes them."""
        with self.connection("listing due jobs") as conn:
            found = conn.execute(
                query("due_jobs_in_dequeue_order"), {"queue": queue, "now": now, "limit": limit}
            ).fetchall()
        return [DueJob(int(p), int(i), int(pr), int(r)) for p, i, pr, r in found]
