"""Reads of a (replayed) queue as of a moment (`pinledger replay --as-of`): its counts by
state, priority and dueness, and its due jobs in dequeue order."""

from __future__ import annotations

from pinledger.ledger.state import JobState
from pinledger.projections.sql.base import SqlBase
from pinledger.projections.store import DueJob, StateCount


class SqlAsOfCounts(SqlBase):
    def counts_as_of(self, queue: str, now: int) -> list[StateCount]:
        """(state, priority, future, count) of one queue; future: run_after > now."""
        params = {"queue": queue, "now": now, "away": self._hidden(queue)}
        found = self._all("counting jobs as of a moment", "queue_counts_as_of", params)
        return [
            StateCount(JobState(state), priority, bool(future), int(n))
            for state, priority, future, n in found
        ]

    def due_in_dequeue_order(self, queue: str, now: int, limit: int) -> list[DueJob]:
        """PENDING jobs due at `now`, in the order a dequeue takes them."""
        params = {"queue": queue, "now": now, "limit": limit, "away": self._hidden(queue)}
        found = self._all("listing due jobs", "due_jobs_in_dequeue_order", params)
        return [DueJob(int(p), int(i), int(pr), int(r)) for p, i, pr, r in found]
