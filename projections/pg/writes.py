"""The projector's writes: a partition's batch and the catalog's changes, each in one
transaction with the offset's compare-and-set (projections/store.py says why that
fences)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
import psycopg
from psycopg.types.json import Jsonb

from pinledger.ledger.state import Job
from pinledger.projections.columns import imported_params
from pinledger.projections.pg.history import PgHistory, missing_partition
from pinledger.projections.pg.sql import query
from pinledger.projections.store import (
    PartitionBatch,
    QueueRow,
    StoreError,
    catalog_fenced,
    check_forward,
    fenced,
)

# From this many jobs on, a batch's upserts go as one statement (a binary COPY into a
# staging table and one upsert from it); below it, as pipelined single-row upserts
# (upsert_job). The owner's batches are small and ~18% faster pipelined; a replay's are
# large and faster as one statement (bench A/Bs in docs/performance.md). A store takes
# another threshold as `one_statement_upserts` (tests make every batch take one path).
ONE_STATEMENT_UPSERTS = 1000


class PgWrites(PgHistory):
    def __init__(
        self,
        dsn: str,
        schema: str = "public",
        max_size: int = 8,
        one_statement_upserts: int = ONE_STATEMENT_UPSERTS,
    ) -> None:
        super().__init__(dsn, schema, max_size)
        self.one_statement_upserts = one_statement_upserts

    def offset(self, topic: str, partition: int) -> int:
        """Next offset to project for a partition (0 when never projected)."""
        with self.connection("reading an offset") as conn:
            conn.execute(query("init_offset"), {"topic": topic, "partition": partition})
            row = conn.execute(
                query("get_offset"), {"topic": topic, "partition": partition}
            ).fetchone()
        assert row is not None  # init_offset guarantees the row
        return int(row[0])

    def commit_partition_batch(self, batch: PartitionBatch) -> None:
        check_forward(batch.topic, batch.partition, batch.expected_offset, batch.next_offset)
        # The day partitions of the batch's events exist before they are written: an
        # event time outside every partition never fails the projector.
        self.ensure_history_for(row.at for row in batch.events)
        try:
            self._commit_batch(batch)
        except StoreError as exc:
            if not missing_partition(exc):
                raise
            # A partition this process had seen was dropped since (history retention):
            # create it again and commit once more.
            self.forget_history_partitions()
            self.ensure_history_for(row.at for row in batch.events)
            self._commit_batch(batch)

    def _commit_batch(self, batch: PartitionBatch) -> None:
        where = f"committing {batch.topic}[{batch.partition}]"
        with self.connection(where, transaction=True) as conn:
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
                _fenced(conn, batch)
            if batch.events:
                _copy_events(conn, batch)
            if batch.removals:
                conn.execute(
                    query("remove_jobs"),
                    {"queue": batch.queue, "partition": batch.partition, "ids": batch.removals},
                )
            if batch.imported:
                conn.cursor().executemany(query("record_imported"), imported_params(batch))
            if len(batch.upserts) >= self.one_statement_upserts:
                _copy_upserts(conn, batch)
            elif batch.upserts:
                conn.cursor().executemany(
                    query("upsert_job"),
                    [_upsert_row(batch, job) for job in batch.upserts],
                )

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
        check_forward(topic, 0, expected_offset, next_offset)
        with self.connection(f"committing catalog {topic}", transaction=True) as conn:
            cur = conn.execute(
                query("advance_offset"),
                {"topic": topic, "partition": 0, "expected": expected_offset, "next": next_offset},
            )
            if cur.rowcount != 1:
                raise catalog_fenced(topic, expected_offset)
            for name, queue_topic in deleted:
                params = {"name": name, "topic": queue_topic}
                for statement in (
                    "delete_queue",
                    "delete_queue_jobs",
                    "delete_queue_job_events",
                    "delete_queue_imported",
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


def _fenced(conn: psycopg.Connection, batch: PartitionBatch) -> None:
    """Why the offset did not move: raise the matching error."""
    found = conn.execute(
        query("get_offset"), {"topic": batch.topic, "partition": batch.partition}
    ).fetchone()
    raise fenced(batch, None if found is None else int(found[0]))


# The column types of copy_job_events_binary, in its order.
_EVENT_TYPES = (
    "text",
    "int4",
    "int8",
    "int8",
    "int4",
    "text",
    "int8",
    "text",
    "text",
    "text",
    "text",
    "bool",
    "text",
    "int2",
    "int4",
    "jsonb",
    "text",
)


def _copy_events(conn: psycopg.Connection, batch: PartitionBatch) -> None:
    """A batch's timeline rows by binary COPY, the detail serialized by orjson: ~20% less
    of our CPU per replayed event than text COPY and the json module did
    (docs/performance.md, "Replay")."""
    with conn.cursor().copy(query("copy_job_events_binary")) as copy:
        copy.set_types(_EVENT_TYPES)
        queue, partition = batch.queue, batch.partition
        for row in batch.events:
            copy.write_row(
                (
                    queue,
                    partition,
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
                    Jsonb(row.detail, dumps=orjson.dumps),
                    row.traceparent,
                )
            )


# The column types of copy_jobs_stage, in its order.
_JOB_TYPES = (
    "text",
    "int4",
    "int8",
    "int2",
    "int2",
    "bytea",
    "int4",
    "int4",
    "text",
    "int8",
    "int8",
    "int8",
    "text",
    "text",
    "int8",
    "text",
)


def _copy_upserts(conn: psycopg.Connection, batch: PartitionBatch) -> None:
    """A large batch's jobs: binary COPY into the session's staging table, then one
    upsert from it."""
    conn.execute(query("create_jobs_stage"))
    queue, partition, traceparents = batch.queue, batch.partition, batch.traceparents
    with conn.cursor().copy(query("copy_jobs_stage")) as copy:
        copy.set_types(_JOB_TYPES)
        for job in batch.upserts:
            copy.write_row(
                (
                    queue,
                    partition,
                    job.local_id,
                    job.priority,
                    int(job.state),
                    job.body,
                    job.attempts_allowed,
                    job.attempts_remaining,
                    job.custom_status,
                    job.created_at,
                    job.run_after,
                    job.updated_at,
                    job.claim,
                    job.claim_source,
                    job.touched_at,
                    traceparents.get(job.local_id),
                )
            )
    conn.execute(query("upsert_staged_jobs"))


def _upsert_row(batch: PartitionBatch, job: Job) -> dict[str, Any]:
    return {
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
