"""Reads of the current jobs: what owners load, and lookups, counts, scans and bulk
selections for the RPCs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pinledger.ledger.descriptor import JobDescriptor
from pinledger.ledger.state import Job, JobState
from pinledger.projections.pg import rows
from pinledger.projections.pg.connection import PgConnection
from pinledger.projections.pg.sql import query
from pinledger.projections.store import (
    HeldJob,
    JobCount,
    JobFilter,
    JobRow,
    QueueRow,
    ScanKey,
)


class PgReads(PgConnection):
    def offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Next offset to project for each partition that has been seen."""
        keys = list(partitions)
        if not keys:
            return {}
        with self.connection("reading offsets") as conn:
            found = conn.execute(
                query("get_offsets"),
                {"topics": [t for t, _ in keys], "partitions": [p for _, p in keys]},
            ).fetchall()
        return {(topic, partition): int(offset) for topic, partition, offset in found}

    def load_jobs(self, queue: str, partition: int, ids: Iterable[int]) -> dict[int, Job]:
        id_list = list(ids)
        if not id_list:
            return {}
        with self.connection("loading jobs") as conn:
            found = conn.execute(
                query("load_jobs"), {"queue": queue, "partition": partition, "ids": id_list}
            ).fetchall()
        return {row[0]: rows.job(row) for row in found}

    def partition_jobs(
        self, queue: str, partition: int, states: Iterable[JobState] = tuple(JobState)
    ) -> dict[int, Job]:
        with self.connection("loading a partition's jobs") as conn:
            found = conn.execute(
                query("partition_jobs"),
                {"queue": queue, "partition": partition, "states": [int(s) for s in states]},
            ).fetchall()
        return {row[0]: rows.job(row) for row in found}

    def partition_traceparents(
        self, queue: str, partition: int, states: Iterable[JobState]
    ) -> dict[int, str]:
        with self.connection("loading trace contexts") as conn:
            found = conn.execute(
                query("partition_traceparents"),
                {"queue": queue, "partition": partition, "states": [int(s) for s in states]},
            ).fetchall()
        return {int(local_id): str(traceparent) for local_id, traceparent in found}

    def ready_jobs(
        self, queue: str, partition: int, priority: int, after: tuple[int, int], limit: int
    ) -> list[HeldJob]:
        params = {
            "queue": queue,
            "partition": partition,
            "priority": priority,
            "after_run_after": after[0],
            "after_local_id": after[1],
            "limit": limit,
        }
        with self.connection("refilling a ready window") as conn:
            found = conn.execute(query("ready_jobs"), params).fetchall()
        return [rows.held(row) for row in found]

    def expired_claims(
        self, queue: str, partition: int, touched_before: int, limit: int
    ) -> list[HeldJob]:
        params = {
            "queue": queue,
            "partition": partition,
            "touched_before": touched_before,
            "limit": limit,
        }
        with self.connection("finding expired claims") as conn:
            found = conn.execute(query("expired_claims"), params).fetchall()
        return [rows.held(row) for row in found]

    def expired(
        self, queue: str, partition: int, succeeded_before: int, failed_before: int, limit: int
    ) -> list[Job]:
        """Finished jobs of a partition last updated at or before the cut-offs."""
        params = {
            "queue": queue,
            "partition": partition,
            "succeeded_before": succeeded_before,
            "failed_before": failed_before,
            "limit": limit,
        }
        with self.connection("finding expired jobs") as conn:
            found = conn.execute(query("expired_jobs"), params).fetchall()
        return [rows.job(row) for row in found]

    def queues(self) -> list[QueueRow]:
        with self.connection("listing queues") as conn:
            found = conn.execute(query("list_queues")).fetchall()
        return [QueueRow(*row) for row in found]

    def job_counts(self) -> list[JobCount]:
        with self.connection("counting jobs") as conn:
            found = conn.execute(query("job_counts")).fetchall()
        return [
            JobCount(queue, JobState(state), priority, n) for queue, state, priority, n in found
        ]

    def check_regex(self, regex: str | None) -> None:
        if regex is None:
            return
        with self.connection(f"checking {regex!r}") as conn:
            conn.execute(query("check_regex"), {"regex": regex})

    def lookup(
        self, queue: str, keys: Sequence[tuple[int, int]], include_body: bool
    ) -> list[JobRow]:
        """Jobs of one queue by (partition, local_id); missing ones are left out."""
        if not keys:
            return []
        params = {
            "queue": queue,
            "partitions": [p for p, _ in keys],
            "ids": [i for _, i in keys],
            "include_body": include_body,
        }
        with self.connection("looking up jobs") as conn:
            found = conn.execute(query("lookup_jobs"), params).fetchall()
        return [rows.looked_up(row) for row in found]

    def imported(self, queue: str, old_descriptors: Sequence[str]) -> dict[str, JobDescriptor]:
        if not old_descriptors:
            return {}
        params = {"queue": queue, "old": list(old_descriptors)}
        with self.connection("reading imported descriptors") as conn:
            found = conn.execute(query("imported_descriptors"), params).fetchall()
        return {
            str(old): JobDescriptor(queue, int(partition), int(priority), int(local_id))
            for old, partition, local_id, priority in found
        }

    def count(self, where: JobFilter, now: int, future: bool) -> int:
        with self.connection("counting jobs") as conn:
            row = conn.execute(query("count_jobs"), _filter(where, now, future)).fetchone()
        return int(row[0]) if row else 0

    def scan(
        self, where: JobFilter, now: int, future: bool, after: ScanKey | None, limit: int
    ) -> list[JobRow]:
        params = _filter(where, now, future) | {
            "after_run_after": after.run_after if after else None,
            "after_partition": after.partition if after else None,
            "after_local_id": after.local_id if after else None,
            "limit": limit,
        }
        with self.connection("scanning jobs") as conn:
            found = conn.execute(query("scan_jobs"), params).fetchall()
        return [rows.scanned(row) for row in found]

    def select(self, where: JobFilter, limit: int) -> list[JobRow]:
        """Jobs for a bulk action, oldest run_after first, without bodies."""
        assert where.priority is not None
        params = _filter(where, 0, False) | {"limit": limit}
        with self.connection("selecting jobs") as conn:
            found = conn.execute(query("select_jobs"), params).fetchall()
        return [rows.selected(row) for row in found]


def _filter(where: JobFilter, now: int, future: bool) -> dict[str, Any]:
    return {
        "queue": where.queue,
        "state": int(where.state),
        "priority": where.priority,
        "regex": where.regex,
        "now": now,
        "future": future,
    }
