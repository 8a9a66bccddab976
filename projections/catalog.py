"""The queues the catalog's events describe, folded in memory: what the catalog
projector writes into the `queues` table (projector.py), for those that read the
catalog from the log themselves (verify, `pinledger queue resize`). The first creation
of a name stands until its deletion; a resize only ever adds partitions, and says how
many of them take new jobs; a retirement covers closed partitions only, and a resize
reopens the retired ones below its count; the first placement of a partition on a store
shard stands until a move of it from that shard (decision 0031); the last pause or
resume of a queue stands, and a queue created again starts unpaused (decision 0035)."""

from __future__ import annotations

import dataclasses
from collections.abc import MutableMapping

from pinledger.ledger.events import (
    Event,
    PartitionMoved,
    PartitionPlaced,
    PartitionsRetired,
    QueueCreated,
    QueueDeleted,
    QueuePaused,
    QueueResized,
)
from pinledger.projections.store import QueueRow


def fold_queue_event(queues: MutableMapping[str, QueueRow], event: Event, at: int) -> None:
    if isinstance(event, QueueCreated):
        queues.setdefault(event.name, QueueRow(event.name, event.partitions, at))
    elif isinstance(event, QueueResized):
        row = queues.get(event.name)
        if row is not None:
            queues[event.name] = dataclasses.replace(
                row,
                partitions=max(row.partitions, event.partitions),
                open_partitions=event.partitions,
                retired_from=(
                    None if row.retired_from is None else max(row.retired_from, event.partitions)
                ),
            )
    elif isinstance(event, PartitionsRetired):
        row = queues.get(event.name)
        if row is not None and event.first >= row.open:  # only closed ones retire
            queues[event.name] = dataclasses.replace(row, retired_from=event.first)
    elif isinstance(event, PartitionPlaced):
        row = queues.get(event.name)
        if row is not None:
            queues[event.name] = placed(row, event)
    elif isinstance(event, PartitionMoved):
        row = queues.get(event.name)
        if row is not None:
            queues[event.name] = moved(row, event)
    elif isinstance(event, QueuePaused):
        row = queues.get(event.name)
        if row is not None:
            queues[event.name] = dataclasses.replace(row, paused=event.paused)
    elif isinstance(event, QueueDeleted):
        queues.pop(event.name, None)


def placed(row: QueueRow, event: PartitionPlaced) -> QueueRow:
    """The queue row with the partition placed, unless it already was or the queue has
    no such partition (the projection's INSERT does the same: first placement stands)."""
    p = event.partition
    if not 0 <= p < row.partitions or row.shard_of(p) is not None:
        return row
    return _on_shard(row, p, event.shard)


def moved(row: QueueRow, event: PartitionMoved) -> QueueRow:
    """The queue row with the partition on the move's shard, if the partition is on the
    shard the move names ("": unplaced) and the queue has it (as the projection's
    compare-and-set: of two moves of one partition, the first wins)."""
    p = event.partition
    if not 0 <= p < row.partitions or (row.shard_of(p) or "") != event.source:
        return row
    return _on_shard(row, p, event.shard)


def _on_shard(row: QueueRow, partition: int, shard: str) -> QueueRow:
    if not shard:  # as the projection: a placement names a shard
        return row
    shards = list(row.shards) + [""] * (partition + 1 - len(row.shards))
    shards[partition] = shard
    return dataclasses.replace(row, shards=tuple(shards))
