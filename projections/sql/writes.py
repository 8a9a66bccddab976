"""The projector's writes: a partition's batch and the catalog's changes, each in one
transaction with the offset's compare-and-set (projections/store.py says why that
fences)."""

from __future__ import annotations

from collections.abc import Sequence

from pinledger.ledger.events import (
    PartitionMoved,
    PartitionsRetired,
    Placement,
    QueuePaused,
    RecordSkipped,
)
from pinledger.projections.row_mapping import imported_params
from pinledger.projections.skips import stored_reason
from pinledger.projections.sql.day_partitions import SqlDayPartitions
from pinledger.projections.sql.dialect import Session
from pinledger.projections.store import (
    PartitionBatch,
    QueueRow,
    ScheduleTick,
    StoreError,
    catalog_fenced,
    check_forward,
    fenced,
    partition_gone,
)

# What a deleted queue takes with it, in this order: its offsets first (the SQL says
# why). A queue created takes the same first: whatever a store holds under its name
# belongs to an earlier queue of that name (decision 0032).
_DELETE_QUEUE = (
    "delete_topic_offsets",
    "delete_queue",
    "delete_queue_placements",
    "delete_queue_skips",
    "delete_queue_ticks",
    "delete_queue_jobs",
    "delete_queue_job_events",
    "delete_queue_imported",
)

# A partition moved away: (the last key of a batch, the delete up to it), per table.
_REMOVE_MOVED = (
    ("moved_jobs_batch_end", "remove_moved_jobs"),
    ("moved_job_events_batch_end", "remove_moved_job_events"),
    ("moved_imported_batch_end", "remove_moved_imported"),
)


class SqlWrites(SqlDayPartitions):
    def offset(self, topic: str, partition: int) -> int:
        params = {"topic": topic, "partition": partition}
        with self.dialect.session("reading an offset") as session:
            found = session.fetchall("get_offset", params)
        if not found:
            raise partition_gone(topic, partition)
        return int(found[0][0])

    def start_offset(self, topic: str, partition: int) -> int:
        params = {"topic": topic, "partition": partition}
        with self.dialect.session("starting an offset") as session:
            session.execute("init_offset", params)
            found = session.fetchall("get_offset", params)
        assert found  # init_offset guarantees the row
        return int(found[0][0])

    def skipped_records(self, queue: str, partition: int) -> dict[int, str]:
        """The partition's records an operator skipped: offset -> reason."""
        rows = self._all(
            f"reading the skipped records of {queue}[{partition}]",
            "skipped_records",
            {"queue": queue, "partition": partition},
        )
        return {int(offset): str(reason) for offset, reason in rows}

    def commit_partition_batch(self, batch: PartitionBatch) -> None:
        check_forward(batch.topic, batch.partition, batch.expected_offset, batch.next_offset)
        # The day partitions of the batch's events exist before they are written: an
        # event time outside every partition never fails the projector.
        self.ensure_day_partitions_for(row.at for row in batch.events)
        try:
            self._commit_batch(batch)
        except StoreError as exc:
            if not self.dialect.missing_partition(exc):
                raise
            # A partition this process had seen was dropped since (the retention):
            # create it again and commit once more.
            self.forget_day_partitions()
            self.ensure_day_partitions_for(row.at for row in batch.events)
            self._commit_batch(batch)

    def _commit_batch(self, batch: PartitionBatch) -> None:
        where = f"committing {batch.topic}[{batch.partition}]"
        with self.dialect.session(where, transaction=True) as session:
            moved = session.execute(
                "advance_offset",
                {
                    "topic": batch.topic,
                    "partition": batch.partition,
                    "expected": batch.expected_offset,
                    "next": batch.next_offset,
                },
            )
            if moved != 1:
                _fenced(session, batch)
            if batch.events:
                session.insert_events(batch)
            if batch.removals:
                session.execute(
                    "remove_jobs",
                    {"queue": batch.queue, "partition": batch.partition, "ids": batch.removals},
                )
            if batch.imported:
                session.executemany("record_imported", imported_params(batch))
            if batch.upserts:
                session.upsert_jobs(batch)

    def remove_partition(self, queue: str, topic: str, partition: int, limit: int) -> int:
        where = {"queue": queue, "topic": topic, "partition": partition, "limit": limit}
        with self.dialect.session(f"removing {topic}[{partition}]", transaction=True) as session:
            session.execute("forget_partition_offset", where)
            for batch_end, remove in _REMOVE_MOVED:
                upto = session.fetchall(batch_end, where)[0][0]
                if upto is not None:
                    # At least 1: rows found and gone meanwhile still mean "not done yet".
                    return max(1, session.execute(remove, {**where, "upto": upto}))
        return 0

    def commit_catalog(
        self,
        topic: str,
        expected_offset: int,
        next_offset: int,
        created: Sequence[tuple[QueueRow, Sequence[str]]],
        deleted: Sequence[tuple[str, str]],
        resized: Sequence[tuple[QueueRow, Sequence[str]]] = (),
        retired: Sequence[PartitionsRetired] = (),
        placed: Sequence[Placement] = (),
        skipped: Sequence[RecordSkipped] = (),
        paused: Sequence[QueuePaused] = (),
        ticks: Sequence[ScheduleTick] = (),
    ) -> None:
        """Apply queue creations (row, partition topics to start at offset 0),
        deletions (queue name, its topic), resizes, retirements, placements, skipped
        records, pauses and schedules' ticks with the catalog offset, in one
        transaction."""
        check_forward(topic, 0, expected_offset, next_offset)
        with self.dialect.session(f"committing catalog {topic}", transaction=True) as session:
            moved = session.execute(
                "advance_offset",
                {"topic": topic, "partition": 0, "expected": expected_offset, "next": next_offset},
            )
            if moved != 1:
                raise catalog_fenced(topic, expected_offset)
            for name, queue_topic in deleted:
                for statement in _DELETE_QUEUE:
                    session.execute(statement, {"name": name, "topic": queue_topic})
            for row, topics in created:
                # A new queue under an old name starts empty, from offset 0 of its new
                # topic, whatever an owner of the old one left (decision 0032).
                for queue_topic in topics:
                    for statement in _DELETE_QUEUE:
                        session.execute(statement, {"name": row.name, "topic": queue_topic})
                session.execute(
                    "create_queue",
                    {"name": row.name, "partitions": row.partitions, "at": row.created_at},
                )
                _start_partitions(session, row, topics)
            for row, topics in resized:
                # A queue keeps every partition it had (Kafka's too); fewer take jobs.
                session.execute("resize_queue", {"name": row.name, "partitions": row.partitions})
                _start_partitions(session, row, topics)
            for retirement in retired:
                session.execute(
                    "retire_partitions", {"name": retirement.name, "first": retirement.first}
                )
            for placement in placed:
                if placement.shard:  # as the fold: a placement names a shard
                    session.execute(*_placement_statement(placement))
            _record_skips(session, skipped)
            for pause in paused:
                session.execute("pause_queue", {"name": pause.name, "paused": pause.paused})
            for tick in ticks:
                # Of a queue held, and only raising the schedule's tick (the statement).
                session.execute(
                    "record_tick",
                    {
                        "name": tick.queue,
                        "schedule": tick.schedule,
                        "tick_ms": tick.tick_ms,
                        "job": tick.job,
                        "at": tick.at,
                    },
                )


def _start_partitions(session: Session, row: QueueRow, topics: Sequence[str]) -> None:
    """The offsets of a created or grown queue's partitions, at 0 where missing (none for
    a queue the store does not hold)."""
    for queue_topic in topics:
        for partition in range(row.partitions):
            session.execute(
                "init_queue_offset",
                {"topic": queue_topic, "partition": partition, "name": row.name},
            )


def _placement_statement(placement: Placement) -> tuple[str, dict[str, object]]:
    """A first placement, or a move (only from the shard it names)."""
    where: dict[str, object] = {
        "name": placement.name,
        "partition": placement.partition,
        "shard": placement.shard,
    }
    if isinstance(placement, PartitionMoved):
        return "move_partition", {**where, "source": placement.source}
    return "place_partition", where


def _record_skips(session: Session, skipped: Sequence[RecordSkipped]) -> None:
    """Skipped records (decision 0032): only of partitions the queues have, the first
    skip of an offset standing (the statement says both)."""
    for skip in skipped:
        session.execute(
            "skip_record",
            {
                "name": skip.name,
                "partition": skip.partition,
                "offset": skip.offset,
                "reason": stored_reason(skip.reason),
            },
        )


def _fenced(session: Session, batch: PartitionBatch) -> None:
    """Why the offset did not move: raise the matching error."""
    found = session.fetchall("get_offset", {"topic": batch.topic, "partition": batch.partition})
    raise fenced(batch, int(found[0][0]) if found else None)
