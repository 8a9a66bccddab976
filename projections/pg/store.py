"""The Postgres adapter: the only module that executes SQL (all of it from queries.sql).

A `Store` works in one schema (`search_path`), so the live projection, a replay's
scratch schema and each test's own schema are the same code on different names.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from pinledger.ledger.state import Job, JobState
from pinledger.projections.pg.sql import composed, migrations, query

log = logging.getLogger(__name__)

_SCHEMA_RE = re.compile(r"[a-z_][a-z0-9_]{0,62}")


class StoreError(RuntimeError):
    """Postgres could not do what was asked; the message says what to check."""


class InvalidRegexError(StoreError):
    """A body regex Postgres cannot compile; the message carries Postgres's reason."""


class FencedError(StoreError):
    """Another projector moved the partition's offset: this one must stop and reload."""


class PartitionGoneError(FencedError):
    """The partition's offset row is gone: its queue was deleted (the catalog
    projection removed the queue's rows). Its remaining records must not be projected,
    or they would bring back rows, and an offset, that a queue created again under the
    same name would inherit."""


@dataclass(frozen=True, slots=True)
class EventRow:
    """One row of the job's timeline (job_events)."""

    local_id: int
    offset: int
    idx: int
    type: str
    at: int
    source: str
    request_id: str
    server: str
    claim: str | None
    applied: bool
    verdict: str
    state_after: int | None
    attempts_remaining_after: int | None
    detail: dict[str, Any]
    traceparent: str | None


@dataclass(slots=True)
class PartitionBatch:
    """What one projected batch of records changes in one partition, committed in one
    transaction together with the partition's new offset."""

    queue: str
    topic: str
    partition: int
    expected_offset: int
    next_offset: int
    upserts: list[Job] = field(default_factory=list)
    removals: list[int] = field(default_factory=list)
    events: list[EventRow] = field(default_factory=list)
    traceparents: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class JobFilter:
    """Which jobs of a queue a count, scan or bulk action looks at."""

    queue: str
    state: JobState
    priority: int | None = None
    regex: str | None = None


@dataclass(frozen=True, slots=True)
class JobRow:
    """A job as lookups and scans return it (with its partition; body only on demand)."""

    partition: int
    job: Job


@dataclass(frozen=True, slots=True)
class ScanKey:
    """Where a scan page ended: the next page starts strictly after it."""

    run_after: int
    partition: int
    local_id: int


@dataclass(frozen=True, slots=True)
class QueueRow:
    name: str
    partitions: int
    created_at: int


def check_schema_name(schema: str) -> str:
    if not _SCHEMA_RE.fullmatch(schema):
        raise StoreError(
            f"schema name {schema!r} must be lower-case letters, digits and '_' "
            "(at most 63, not starting with a digit)"
        )
    return schema


def _job_from_row(row: Sequence[Any]) -> Job:
    (
        local_id,
        priority,
        state,
        body,
        allowed,
        remaining,
        status,
        created_at,
        run_after,
        updated_at,
        claim,
        claim_source,
        touched_at,
    ) = row
    return Job(
        local_id=local_id,
        priority=priority,
        state=JobState(state),
        body=bytes(body),
        attempts_allowed=allowed,
        attempts_remaining=remaining,
        custom_status=status,
        created_at=created_at,
        run_after=run_after,
        updated_at=updated_at,
        claim=claim,
        claim_source=claim_source,
        touched_at=touched_at,
    )


# From this many jobs on, a batch's upserts go as one statement over arrays
# (upsert_jobs); below it, as pipelined single-row upserts (upsert_job). The owner's
# batches are small and ~18% faster pipelined; a replay's are large and ~1.6x faster
# as one statement (bench A/Bs in docs/performance.md).
_ONE_STATEMENT_UPSERTS = 1000


class Store:
    def __init__(self, dsn: str, schema: str = "public", max_size: int = 8) -> None:
        self.dsn = dsn
        self.schema = check_schema_name(schema)
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(composed("create_schema", schema=self.schema))
        except psycopg.OperationalError as exc:
            raise StoreError(
                f"cannot connect to Postgres ({exc}). Start it with `make stack-up`, or "
                "point PINLEDGER_PG_DSN at your server."
            ) from exc
        self.pool = ConnectionPool(
            dsn,
            min_size=1,
            max_size=max_size,
            kwargs={"options": f"-c search_path={self.schema}"},
            open=True,
            name=f"pinledger-{self.schema}",
        )

    def close(self) -> None:
        self.pool.close()

    def drop(self) -> None:
        """Drop this store's schema with everything in it (scratch and test schemas)."""
        self.pool.close()
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(composed("drop_schema", schema=self.schema))

    def migrate(self) -> list[str]:
        """Apply the migrations this schema lacks; returns the names applied."""
        applied_now = []
        with self.pool.connection() as conn, conn.transaction():
            conn.execute(query("lock_migrations"))
            conn.execute(query("create_migrations_table"))
            done = {row[0] for row in conn.execute(query("applied_migrations"))}
            for version, name, text in migrations():
                if version in done:
                    continue
                conn.execute(text.encode("utf-8"))
                conn.execute(query("record_migration"), {"version": version, "name": name})
                applied_now.append(name)
        return applied_now

    # -- offsets -------------------------------------------------------------------

    def offset(self, topic: str, partition: int) -> int:
        """Next offset to project for a partition (0 when never projected)."""
        with self.pool.connection() as conn:
            conn.execute(query("init_offset"), {"topic": topic, "partition": partition})
            row = conn.execute(
                query("get_offset"), {"topic": topic, "partition": partition}
            ).fetchone()
        assert row is not None  # init_offset guarantees the row
        return int(row[0])

    # -- jobs ------------------------------------------------------------------------

    def load_jobs(self, queue: str, partition: int, ids: Iterable[int]) -> dict[int, Job]:
        id_list = list(ids)
        if not id_list:
            return {}
        with self.pool.connection() as conn:
            rows = conn.execute(
                query("load_jobs"), {"queue": queue, "partition": partition, "ids": id_list}
            ).fetchall()
        return {row[0]: _job_from_row(row) for row in rows}

    def partition_jobs(
        self, queue: str, partition: int, states: Iterable[JobState] = tuple(JobState)
    ) -> dict[int, Job]:
        with self.pool.connection() as conn:
            rows = conn.execute(
                query("partition_jobs"),
                {"queue": queue, "partition": partition, "states": [int(s) for s in states]},
            ).fetchall()
        return {row[0]: _job_from_row(row) for row in rows}

    def partition_traceparents(
        self, queue: str, partition: int, states: Iterable[JobState]
    ) -> dict[int, str]:
        with self.pool.connection() as conn:
            rows = conn.execute(
                query("partition_traceparents"),
                {"queue": queue, "partition": partition, "states": [int(s) for s in states]},
            ).fetchall()
        return {int(local_id): str(traceparent) for local_id, traceparent in rows}

    def commit_partition_batch(self, batch: PartitionBatch) -> None:
        with self.pool.connection() as conn, conn.transaction():
            cur = conn.execute(
                query("advance_offset"),
                {
                    "topic": batch.topic,
                    "partition": batch.partition,
                    "expected": batch.expected_offset,
                    "next": batch.next_offset,
                },
            )
            if cur.rowcount != 1:
                found = conn.execute(
                    query("get_offset"), {"topic": batch.topic, "partition": batch.partition}
                ).fetchone()
                if found is None:
                    raise PartitionGoneError(
                        f"{batch.topic}[{batch.partition}]: queue {batch.queue!r} was deleted; "
                        "its remaining records are not projected"
                    )
                raise FencedError(
                    f"{batch.topic}[{batch.partition}] is no longer at offset "
                    f"{batch.expected_offset}: another projector advanced it to {found[0]}"
                )
            if batch.events:
                with conn.cursor().copy(query("copy_job_events")) as copy:
                    for row in batch.events:
                        copy.write_row(
                            (
                                batch.queue,
                                batch.partition,
                                row.local_id,
                                row.offset,
                                row.idx,
                                row.type,
                                row.at,
                                row.source,
                                row.request_id,
                                row.server,
                                row.claim,
                                row.applied,
                                row.verdict,
                                row.state_after,
                                row.attempts_remaining_after,
                                Jsonb(row.detail),
                                row.traceparent,
                            )
                        )
            if batch.removals:
                conn.execute(
                    query("remove_jobs"),
                    {"queue": batch.queue, "partition": batch.partition, "ids": batch.removals},
                )
            if len(batch.upserts) >= _ONE_STATEMENT_UPSERTS:
                jobs = batch.upserts
                conn.execute(
                    query("upsert_jobs"),
                    {
                        "queue": batch.queue,
                        "partition": batch.partition,
                        "local_id": [j.local_id for j in jobs],
                        "priority": [j.priority for j in jobs],
                        "state": [int(j.state) for j in jobs],
                        "body": [j.body for j in jobs],
                        "attempts_allowed": [j.attempts_allowed for j in jobs],
                        "attempts_remaining": [j.attempts_remaining for j in jobs],
                        "custom_status": [j.custom_status for j in jobs],
                        "created_at": [j.created_at for j in jobs],
                        "run_after": [j.run_after for j in jobs],
                        "updated_at": [j.updated_at for j in jobs],
                        "claim": [j.claim for j in jobs],
                        "claim_source": [j.claim_source for j in jobs],
                        "touched_at": [j.touched_at for j in jobs],
                        "traceparent": [batch.traceparents.get(j.local_id) for j in jobs],
                    },
                )
            elif batch.upserts:
                conn.cursor().executemany(
                    query("upsert_job"),
                    [
                        {
                            "queue": batch.queue,
                            "partition": batch.partition,
                            "local_id": job.local_id,
                            "priority": job.priority,
                            "state": int(job.state),
                            "body": job.body,
                            "attempts_allowed": job.attempts_allowed,
                            "attempts_remaining": job.attempts_remaining,
                            "custom_status": job.custom_status,
                            "created_at": job.created_at,
                            "run_after": job.run_after,
                            "updated_at": job.updated_at,
                            "claim": job.claim,
                            "claim_source": job.claim_source,
                            "touched_at": job.touched_at,
                            "traceparent": batch.traceparents.get(job.local_id),
                        }
                        for job in batch.upserts
                    ],
                )

    # -- queues (the catalog) ----------------------------------------------------------

    def commit_catalog(
        self,
        topic: str,
        expected_offset: int,
        next_offset: int,
        created: Sequence[tuple[QueueRow, Sequence[str]]],
        deleted: Sequence[tuple[str, str]],
    ) -> None:
        """Apply queue creations (row, partition topics to start at offset 0) and
        deletions (queue name, its topic) with the catalog offset, in one transaction."""
        with self.pool.connection() as conn, conn.transaction():
            cur = conn.execute(
                query("advance_offset"),
                {"topic": topic, "partition": 0, "expected": expected_offset, "next": next_offset},
            )
            if cur.rowcount != 1:
                raise FencedError(f"catalog {topic} is no longer at offset {expected_offset}")
            for name, queue_topic in deleted:
                params = {"name": name, "topic": queue_topic}
                for statement in (
                    "delete_queue",
                    "delete_queue_jobs",
                    "delete_queue_job_events",
                    "delete_topic_offsets",
                ):
                    conn.execute(query(statement), params)
            for row, topics in created:
                conn.execute(
                    query("create_queue"),
                    {"name": row.name, "partitions": row.partitions, "at": row.created_at},
                )
                for queue_topic in topics:
                    for partition in range(row.partitions):
                        conn.execute(
                            query("init_offset"), {"topic": queue_topic, "partition": partition}
                        )

    def offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Next offset to project for each partition that has been seen."""
        keys = list(partitions)
        if not keys:
            return {}
        with self.pool.connection() as conn:
            rows = conn.execute(
                query("get_offsets"),
                {"topics": [t for t, _ in keys], "partitions": [p for _, p in keys]},
            ).fetchall()
        return {(topic, partition): int(offset) for topic, partition, offset in rows}

    def check_regex(self, regex: str | None) -> None:
        if regex is None:
            return
        try:
            with self.pool.connection() as conn:
                conn.execute(query("check_regex"), {"regex": regex})
        except psycopg.errors.InvalidRegularExpression as exc:
            raise InvalidRegexError(
                f"invalid body regex {regex!r} (Postgres regular expression syntax): "
                f"{exc.diag.message_primary}"
            ) from None

    def lookup(
        self, queue: str, keys: Sequence[tuple[int, int]], include_body: bool
    ) -> list[JobRow]:
        """Jobs of one queue by (partition, local_id); missing ones are left out."""
        if not keys:
            return []
        with self.pool.connection() as conn:
            rows = conn.execute(
                query("lookup_jobs"),
                {
                    "queue": queue,
                    "partitions": [p for p, _ in keys],
                    "ids": [i for _, i in keys],
                    "include_body": include_body,
                },
            ).fetchall()
        return [
            JobRow(
                row[0], _job_from_row((*row[1:3], row[3], row[11] or b"", *row[4:11], None, None))
            )
            for row in rows
        ]

    def count(self, where: JobFilter, now: int, future: bool) -> int:
        with self.pool.connection() as conn:
            row = conn.execute(query("count_jobs"), self._filter(where, now, future)).fetchone()
        return int(row[0]) if row else 0

    def scan(
        self, where: JobFilter, now: int, future: bool, after: ScanKey | None, limit: int
    ) -> list[JobRow]:
        params = self._filter(where, now, future) | {
            "after_run_after": after.run_after if after else None,
            "after_partition": after.partition if after else None,
            "after_local_id": after.local_id if after else None,
            "limit": limit,
        }
        with self.pool.connection() as conn:
            rows = conn.execute(query("scan_jobs"), params).fetchall()
        return [
            JobRow(row[0], _job_from_row((row[1], row[2], row[3], b"", *row[4:11], None, None)))
            for row in rows
        ]

    def select(self, where: JobFilter, limit: int) -> list[JobRow]:
        """Jobs for a bulk action, oldest run_after first, without bodies."""
        assert where.priority is not None
        params = self._filter(where, 0, False) | {"limit": limit}
        with self.pool.connection() as conn:
            rows = conn.execute(query("select_jobs"), params).fetchall()
        return [JobRow(row[0], _job_from_row(row[1:])) for row in rows]

    def expired(
        self, queue: str, partition: int, succeeded_before: int, failed_before: int, limit: int
    ) -> list[Job]:
        """Finished jobs of a partition last updated at or before the cut-offs."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                query("expired_jobs"),
                {
                    "queue": queue,
                    "partition": partition,
                    "succeeded_before": succeeded_before,
                    "failed_before": failed_before,
                    "limit": limit,
                },
            ).fetchall()
        return [_job_from_row(row) for row in rows]

    @staticmethod
    def _filter(where: JobFilter, now: int, future: bool) -> dict[str, Any]:
        return {
            "queue": where.queue,
            "state": int(where.state),
            "priority": where.priority,
            "regex": where.regex,
            "now": now,
            "future": future,
        }

    def queues(self) -> list[QueueRow]:
        with self.pool.connection() as conn:
            rows = conn.execute(query("list_queues")).fetchall()
        return [QueueRow(*row) for row in rows]

    def job_counts(self) -> list[tuple[str, JobState, int, int]]:
        with self.pool.connection() as conn:
            rows = conn.execute(query("job_counts")).fetchall()
        return [(queue, JobState(state), priority, count) for queue, state, priority, count in rows]

    def timeline(self, queue: str, partition: int, local_id: int) -> list[tuple[Any, ...]]:
        with self.pool.connection() as conn:
            return conn.execute(
                query("job_timeline"),
                {"queue": queue, "partition": partition, "local_id": local_id},
            ).fetchall()

    def counts_as_of(self, queue: str, now: int) -> list[tuple[JobState, int, bool, int]]:
        """(state, priority, future, count) of one queue; future: run_after > now."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                query("queue_counts_as_of"), {"queue": queue, "now": now}
            ).fetchall()
        return [
            (JobState(state), priority, future, count) for state, priority, future, count in rows
        ]

    def due_in_dequeue_order(
        self, queue: str, now: int, limit: int
    ) -> list[tuple[int, int, int, int]]:
        """(partition, local_id, priority, run_after) of PENDING jobs due at `now`, in
        the order a dequeue takes them."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                query("due_jobs_in_dequeue_order"), {"queue": queue, "now": now, "limit": limit}
            ).fetchall()
        return [(int(p), int(i), int(pr), int(r)) for p, i, pr, r in rows]

    def last_event_time(self, queue: str) -> int | None:
        with self.pool.connection() as conn:
            row = conn.execute(query("last_event_time"), {"queue": queue}).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def job_events(self, queue: str, partition: int, local_id: int) -> list[EventRow]:
        """The job's timeline as rows, in log order (what projections/history.py reads)."""
        return [EventRow(local_id, *row) for row in self.timeline(queue, partition, local_id)]

    # -- replay diff -----------------------------------------------------------------------

    def diff(
        self,
        *,
        other_schema: str,
        table: str,
        queue_column: str,
        partition_column: str,
        queues: Sequence[str],
        partition: int | None,
        limit: int,
    ) -> tuple[int, int, list[Any], list[Any]]:
        """Rows of `table` only here, only in `other_schema` (counts, then samples),
        among rows whose `queue_column` is in `queues` and, when `partition` is given,
        whose integer `partition_column` equals it."""
        params = {"queues": list(queues), "partition": partition, "limit": limit}

        def one_way(left: str, right: str) -> tuple[int, list[Any]]:
            names = {
                "left": left,
                "right": right,
                "table": table,
                "queue_column": queue_column,
                "partition_column": partition_column,
            }
            with self.pool.connection() as conn:
                count_row = conn.execute(composed("diff_count", **names), params).fetchone()
                rows = conn.execute(composed("diff_rows", **names), params).fetchall()
            return (int(count_row[0]) if count_row else 0), [r[0] for r in rows]

        only_here, here_rows = one_way(self.schema, other_schema)
        only_there, there_rows = one_way(other_schema, self.schema)
        return only_here, only_there, here_rows, there_rows
