"""Reads for the dashboard (service/dashboard): the job finder, the oldest due job and
the event rates; each bounded and on an index."""

from __future__ import annotations

from collections.abc import Sequence

from pinledger.projections.mysql import rows
from pinledger.projections.mysql.reads import MyReads
from pinledger.projections.store import EventBucket, JobRow, JobSearch, ScanKey


class MyDashboardReads(MyReads):
    def find_jobs(self, search: JobSearch, after: ScanKey | None, limit: int) -> list[JobRow]:
        params = {
            "queue": search.queue,
            "state": int(search.state),
            "priority": search.priority,
            "body_regex": search.body_regex,
            "status_regex": search.status_regex,
            "after_run_after": after.run_after if after else None,
            "after_partition": after.partition if after else None,
            "after_local_id": after.local_id if after else None,
            "limit": limit,
        }
        return [rows.looked_up(row) for row in self._all("finding jobs", "find_jobs", params)]

    def oldest_due(self, queue: str, now: int, priorities: int) -> int | None:
        params = {"queue": queue, "now": now, "priorities": priorities}
        found = self._all("finding the oldest due job", "oldest_due", params)
        return None if not found or found[0][0] is None else int(found[0][0])

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
        }
        found = self._all("counting events by time", "event_buckets", params)
        return [EventBucket(int(start), str(kind), int(n)) for start, kind, n in found]
