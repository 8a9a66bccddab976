"""Reads for the dashboard (service/dashboard): the job finder, the oldest due job, the
event rates, the overview's capped counts and the workers view's claim holders; each
bounded and on an index."""

from __future__ import annotations

from collections.abc import Sequence

from pinledger.projections.row_mapping import looked_up
from pinledger.projections.sql.base import SqlBase
from pinledger.projections.sql.reads import after_key
from pinledger.projections.store import (
    ClaimHolder,
    EventBucket,
    JobRow,
    JobSearch,
    QueueTally,
    ScanKey,
)


class SqlDashboardReads(SqlBase):
    def find_jobs(self, search: JobSearch, after: ScanKey | None, limit: int) -> list[JobRow]:
        params = {
            "queue": search.queue,
            "state": int(search.state),
            "priority": search.priority,
            "body_regex": search.body_regex,
            "status_regex": search.status_regex,
            "limit": limit,
            "away": self._hidden(search.queue),
        } | after_key(after)
        return [looked_up(row) for row in self._all("finding jobs", "find_jobs", params)]

    def oldest_due(self, queue: str, now: int, priorities: int) -> int | None:
        params = {
            "queue": queue,
            "now": now,
            "priorities": priorities,
            "away": self._hidden(queue),
        }
        found = self._first("finding the oldest due job", "oldest_due", params)
        return None if found is None else int(found)

    def claim_holders(self, queue: str, limit: int) -> list[ClaimHolder]:
        params = {"queue": queue, "limit": limit, "away": self._hidden(queue)}
        found = self._all("listing the claim holders", "claim_holders", params)
        return [ClaimHolder(str(source), int(n), int(last)) for source, n, last in found]

    def event_buckets(
        self, queue: str, types: Sequence[str], since: int, until: int, bucket_ms: int
    ) -> list[EventBucket]:
        if not types:
            return []
        params = {
            "queue": queue,
            "types": list(types),
            "since": since,
            "until": until,
            "bucket_ms": bucket_ms,
            "away": self._hidden(queue),
        }
        found = self._all("counting events by time", "event_buckets", params)
        return [EventBucket(int(start), str(kind), int(n)) for start, kind, n in found]

    def queue_tally(self, queue: str, now: int, priorities: int, cap: int) -> QueueTally:
        params = {
            "queue": queue,
            "now": now,
            "priorities": priorities,  # Postgres: a LATERAL range per priority
            "priority_list": list(range(1, priorities + 1)),  # MariaDB: IN (...)
            "cap": cap,
            "away": self._hidden(queue),
        }
        (row,) = self._all("counting a queue's jobs", "queue_tally", params)
        return QueueTally(*(int(n) for n in row))
