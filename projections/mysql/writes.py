"""The projector's writes: a partition's batch and the catalog's changes, each in one
transaction with the offset's compare-and-set (projections/store.py says why that
fences)."""

from __future__ import annotations

from collections.abc import Sequence

import pymysql.cursors

from pinledger.projections.columns import imported_params
from pinledger.projections.mysql import rows
from pinledger.projections.mysql.history import MyHistory, missing_partition
from pinledger.projections.mysql.sql import query
from pinledger.projections.store import (
    PartitionBatch,
    QueueRow,
    StoreError,
    catalog_fenced,
    check_forward,
    fenced,
)


class MyWrites(MyHistory):
    def offset(self, topic: str, partition: int) -> int:
        """Next offset to project for a partition (0 when never projected)."""
        params = {"topic": topic, "partition": partition}
        with self.cursor("reading an offset") as cur:
            cur.execute(query("init_offset"), params)
            cur.execute(query("get_offset"), params)
            row = cur.fetchone()
        assert row is not None  # init_offset guarantees the row
        return int(row[0])

    def commit_partition_batch(self, batch: PartitionBatch) -> None:
        check_forward(batch.topic, batch.partition, batch.expected_offset, batch.next_offset)
        # The day partitions of the batch's events exist before they are written.
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
        with self.cursor(where, transaction=True) as cur:
            moved = cur.execute(
                query("advance_offset"),
                {
                    "topic": batch.topic,
                    "partition": batch.partition,
                    "expected": batch.expected_offset,
                    "next": batch.next_offset,
                },
            )
            if moved != 1:
                _fenced(cur, batch)
            if batch.events:
                cur.executemany(
                    query("insert_job_event"),
                    [rows.event_params(batch.queue, batch.partition, r) for r in batch.events],
                )
            if batch.removals:
                cur.execute(
                    query("remove_jobs"),
                    {"queue": batch.queue, "partition": batch.partition, "ids": batch.removals},
                )
            if batch.imported:
                cur.executemany(query("record_imported"), imported_params(batch))
            if batch.upserts:
                cur.executemany(
                    query("upsert_job"),
                    [
                        rows.job_params(
                            batch.queue, batch.partition, job, batch.traceparents.get(job.local_id)
                        )
                        for job in batch.upserts
                    ],
                )

    def commit_catalog(
        self,
        topic: str,
        expected_offset: int,
        next_offset: int,
        created: Sequence[tuple[QueueRow, Sequence[str]]],
        deleted: Sequence[tuple[str, str]],
    ) -> None:
        check_forward(topic, 0, expected_offset, next_offset)
        with self.cursor(f"committing catalog {topic}", transaction=True) as cur:
            moved = cur.execute(
                query("advance_offset"),
                {"topic": topic, "partition": 0, "expected": expected_offset, "next": next_offset},
            )
            if moved != 1:
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
                    cur.execute(query(statement), params)
            for row, topics in created:
                cur.execute(
                    query("create_queue"),
                    {"name": row.name, "partitions": row.partitions, "at": row.created_at},
                )
                for queue_topic in topics:
                    for partition in range(row.partitions):
                        cur.execute(
                            query("init_offset"), {"topic": queue_topic, "partition": partition}
                        )


def _fenced(cur: pymysql.cursors.Cursor, batch: PartitionBatch) -> None:
    """Why the offset did not move: raise the matching error."""
    cur.execute(query("get_offset"), {"topic": batch.topic, "partition": batch.partition})
    found = cur.fetchone()
    raise fenced(batch, None if found is None else int(found[0]))
