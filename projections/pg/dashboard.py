"""Reads for the dashboard (service/dashboard): the job finder, the oldest due job and
the event rates; each bounded and on an index."""

from __future__ import annotations

from collections.abc import Sequence

from pinledger.projections.pg import rows
from pinledger.projections.pg.connection import PgConnection
from pinledger.projections.pg.sql import query
from pinledger.projections.store import EventBucket, JobRow, JobSearch, ScanKey


class PgDashboardReads(PgConnection):
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
        with self.connection("finding jobs") as conn:
            found = conn.execute(query("find_jobs"), params).fetchall()
        return [rows.looked_up(row) for row in found]

    def oldest_due(self, queue: str, now: int, priorities: int) -> int | None:
        params = {"queue": queue, "now": now, "priorities": priorities}
        with self.connection("finding the oldest due job") as conn:
            row = conn.execute(query("oldest_due"), params).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def event_buckets(
        self, queue: str, types: Sequence[str], since: int, until: int, bucket_ms: int
    ) -> list[EventBucket]:
        params = {
            "queue": queue,
            "types": list(types),
            "since": since,
            "until": until,
            "bucket_ms": bucket_ms,
        }
        with self.connection("counting events by time") as conn:
            found = conn.execute(query("event_buckets"), params).fetchall()
        return [EventBucket(int(start), str(kind), int(n)) for start, kind, n in found]
