"""Merging consecutive folded batches of one partition into one, committed in one
transaction (the owner's projection writer, service/ownership/projection_writer.py).

Committing the merge leaves the store exactly as committing each batch in turn would
(a property-based test holds the fake store to it): the timeline rows are the
batches' rows in order; the offset moves from the first batch's expected offset to the
last one's next offset; a job several batches touched is written once, in its last
state. The store's upsert keeps a row's first `created_at` and trace context, and a
batch's removals go before its upserts, so the merge keeps what the sequence would:

- a job removed by some batch is removed by the merge (before its upserts), and a later
  batch that wrote it again inserts it afresh;
- a job written after its last removal (or with none) is upserted in its last state
  with the `created_at` and trace context of the first batch that wrote it after that
  removal (the one whose insert would have made the row);
- imported descriptors: every batch's, in order (the store keeps the first per
  descriptor).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pinledger.ledger.state import Job
from pinledger.projections.store import ImportedJob, PartitionBatch


def merge_batches(batches: Sequence[PartitionBatch]) -> PartitionBatch:
    """One batch doing what `batches` (consecutive, of one partition, in order) do."""
    if not batches:
        raise ValueError("nothing to merge")
    first = batches[0]
    if len(batches) == 1:
        return first
    _check_consecutive(batches)
    final: dict[int, Job | None] = {}
    removed: dict[int, None] = {}
    # Per job written since its last removal: the created_at and trace context of the
    # first batch that wrote it (what an insert by that batch would have kept).
    inserted: dict[int, tuple[int, str | None]] = {}
    imported: dict[int, ImportedJob] = {}
    events = []
    for batch in batches:
        events.extend(batch.events)
        for local_id in batch.removals:
            removed[local_id] = None
            final[local_id] = None
            inserted.pop(local_id, None)
        for job in batch.upserts:
            local_id = job.local_id
            final[local_id] = job
            if local_id not in inserted:
                inserted[local_id] = (job.created_at, batch.traceparents.get(local_id))
        for local_id, found in batch.imported.items():
            imported.setdefault(local_id, found)
    upserts: list[Job] = []
    traceparents: dict[int, str] = {}
    for local_id, last in final.items():
        if last is None:
            continue
        created_at, traceparent = inserted[local_id]
        upserts.append(
            last if last.created_at == created_at else replace(last, created_at=created_at)
        )
        if traceparent is not None:
            traceparents[local_id] = traceparent
    return PartitionBatch(
        queue=first.queue,
        topic=first.topic,
        partition=first.partition,
        expected_offset=first.expected_offset,
        next_offset=batches[-1].next_offset,
        upserts=upserts,
        removals=list(removed),
        events=events,
        traceparents=traceparents,
        imported=imported,
    )


def _check_consecutive(batches: Sequence[PartitionBatch]) -> None:
    first = previous = batches[0]
    where = (first.queue, first.topic, first.partition)
    for batch in batches[1:]:
        if (batch.queue, batch.topic, batch.partition) != where:
            raise ValueError("batches of different partitions cannot be merged")
        if batch.expected_offset != previous.next_offset:
            raise ValueError(
                f"{first.topic}[{first.partition}]: a batch expecting offset "
                f"{batch.expected_offset} does not follow one ending at {previous.next_offset}"
            )
        previous = batch
