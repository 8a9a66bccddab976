"""Reads of the current jobs: what owners load, and lookups, counts, scans and bulk
selections for the RPCs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pinledger.ledger.descriptor import JobDescriptor
from pinledger.ledger.state import Job, JobState
from pinledger.projections.row_mapping import held, job, keyed, looked_up, scanned, selected
from pinledger.projections.sql.base import SqlBase
from pinledger.projections.store import (
    HeldJob,
    JobCount,
    JobFilter,
    JobRow,
    QueueRow,
    ScanKey,
    ScheduleTick,
    with_placements,
)


class SqlReads(SqlBase):
    def offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Next offset to project for each partition that has been seen."""
        pairs = list(partitions)
        if not pairs:
            return {}
        params = self.dialect.pair_params(pairs, "topics", "partitions")
        found = self._all("reading offsets", "get_offsets", params)
        return {(topic, partition): int(offset) for topic, partition, offset in found}

    def load_jobs(self, queue: str, partition: int, ids: Iterable[int]) -> dict[int, Job]:
        id_list = list(ids)
        if not id_list:
            return {}
        params = {"queue": queue, "partition": partition, "ids": id_list}
        return {row[0]: job(row) for row in self._all("loading jobs", "load_jobs", params)}

    def keyed_jobs(self, queue: str, partition: int, keys: Iterable[str]) -> list[Job]:
        key_list = list(keys)
        if not key_list:
            return []
        params = {"queue": queue, "partition": partition, "keys": key_list}
        return [keyed(row) for row in self._all("loading keyed jobs", "keyed_jobs", params)]

    def partition_jobs(
        self, queue: str, partition: int, states: Iterable[JobState] = tuple(JobState)
    ) -> dict[int, Job]:
        found = self._in_states(
            "loading a partition's jobs", "partition_jobs", queue, partition, states
        )
        return {row[0]: job(row) for row in found}

    def partition_traceparents(
        self, queue: str, partition: int, states: Iterable[JobState]
    ) -> dict[int, str]:
        found = self._in_states(
            "loading trace contexts", "partition_traceparents", queue, partition, states
        )
        return {int(local_id): str(traceparent) for local_id, traceparent in found}

    def _in_states(
        self, what: str, name: str, queue: str, partition: int, states: Iterable[JobState]
    ) -> list[tuple[Any, ...]]:
        wanted = [int(s) for s in states]
        if not wanted:  # an empty IN () is not SQL on MariaDB
            return []
        return self._all(what, name, {"queue": queue, "partition": partition, "states": wanted})

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
        return [held(row) for row in self._all("refilling a ready window", "ready_jobs", params)]

    def expired_claims(
        self, queue: str, partition: int, touched_before: int, limit: int
    ) -> list[HeldJob]:
        params = {
            "queue": queue,
            "partition": partition,
            "touched_before": touched_before,
            "limit": limit,
        }
        found = self._all("finding expired claims", "expired_claims", params)
        return [held(row) for row in found]

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
        return [job(row) for row in self._all("finding expired jobs", "expired_jobs", params)]

    def queues(self) -> list[QueueRow]:
        rows = self._all("listing queues", "list_queues", {})
        placements = self._all("listing partition placements", "list_placements", {})
        listed = [
            QueueRow(row[0], row[1], row[2], row[3], row[4], paused=bool(row[5])) for row in rows
        ]
        return with_placements(listed, placements)

    def schedule_ticks(self, queue: str | None = None) -> list[ScheduleTick]:
        if queue is None:
            rows = self._all("listing schedules' ticks", "list_schedule_ticks", {})
        else:
            rows = self._all(
                f"listing the schedules' ticks of {queue}", "queue_schedule_ticks", {"queue": queue}
            )
        # Sorted here too: by code point, as every store answers, whatever the collation.
        return sorted(
            ScheduleTick(str(q), str(s), int(t), str(j), int(at)) for q, s, t, j, at in rows
        )

    def holds_jobs_from(self, queue: str, first: int) -> bool:
        params = {"queue": queue, "first": first, "away": self._hidden(queue)}
        return bool(
            self._all("looking for jobs in closed partitions", "jobs_from_partition", params)
        )

    def job_counts(self) -> list[JobCount]:
        # Counted by partition, so that the hidden ones are left out here: every queue's
        # in one query, in the database's order of queues.
        away = self._away
        counts: dict[tuple[str, int, int], int] = {}
        for queue, partition, state, priority, n in self._all("counting jobs", "job_counts", {}):
            if partition not in away.get(queue, ()):
                key = (queue, state, priority)
                counts[key] = counts.get(key, 0) + int(n)
        return [
            JobCount(queue, JobState(state), priority, n)
            for (queue, state, priority), n in counts.items()
        ]

    def check_regex(self, regex: str | None) -> None:
        if regex is None:
            return
        self._all(f"checking {regex!r}", "check_regex", {"regex": regex})

    def lookup(
        self, queue: str, keys: Sequence[tuple[int, int]], include_body: bool
    ) -> list[JobRow]:
        """Jobs of one queue by (partition, local_id); missing ones are left out."""
        if not keys:
            return []
        params = {
            "queue": queue,
            "include_body": include_body,
            **self.dialect.pair_params(list(keys), "partitions", "ids"),
        }
        return [looked_up(row) for row in self._all("looking up jobs", "lookup_jobs", params)]

    def imported(self, queue: str, old_descriptors: Sequence[str]) -> dict[str, JobDescriptor]:
        if not old_descriptors:
            return {}
        params = {"queue": queue, "old": list(old_descriptors), "away": self._hidden(queue)}
        found = self._all("reading imported descriptors", "imported_descriptors", params)
        return {
            str(old): JobDescriptor(queue, int(partition), int(priority), int(local_id))
            for old, partition, local_id, priority in found
        }

    def count(self, where: JobFilter, now: int, future: bool) -> int:
        found = self._first("counting jobs", "count_jobs", self._filter(where, now, future))
        return int(found or 0)

    def scan(
        self, where: JobFilter, now: int, future: bool, after: ScanKey | None, limit: int
    ) -> list[JobRow]:
        params = self._filter(where, now, future) | after_key(after) | {"limit": limit}
        return [scanned(row) for row in self._all("scanning jobs", "scan_jobs", params)]

    def select(self, where: JobFilter, limit: int) -> list[JobRow]:
        """Jobs for a bulk action, oldest run_after first, without bodies."""
        assert where.priority is not None
        params = self._filter(where, 0, False) | {"limit": limit}
        return [selected(row) for row in self._all("selecting jobs", "select_jobs", params)]

    def _filter(self, where: JobFilter, now: int, future: bool) -> dict[str, Any]:
        return {
            "queue": where.queue,
            "state": int(where.state),
            "priority": where.priority,
            "regex": where.regex,
            "now": now,
            "future": future,
            "away": self._hidden(where.queue),
        }


def after_key(after: ScanKey | None) -> dict[str, Any]:
    """Where a page of a scan or of the job finder starts (None: at the first)."""
    return {
        "after_run_after": after.run_after if after else None,
        "after_partition": after.partition if after else None,
        "after_local_id": after.local_id if after else None,
    }
