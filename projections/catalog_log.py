"""The catalog read straight from the log, for what needs more than the `queues` table
holds: `pinledger queue resize` (the queues as of now, without a store) and the
dashboard (when and why each queue was resized)."""

from __future__ import annotations

from typing import NamedTuple

from pinledger.ledger import codec
from pinledger.ledger.events import (
    Envelope,
    PartitionsRetired,
    QueueCreated,
    QueueDeleted,
    QueueResized,
)
from pinledger.ledger.log import Log, catalog_topic
from pinledger.projections.catalog import fold_queue_event
from pinledger.projections.partition_log import read_partition
from pinledger.projections.store import QueueRow


def catalog_envelopes(log: Log, prefix: str) -> list[Envelope]:
    """Every envelope of the catalog, in log order (a few per queue)."""
    topic = catalog_topic(prefix)
    return [
        codec.decode(record.value)
        for record in read_partition(log, topic, 0, 0, log.end_offset(topic, 0))
    ]


def catalog_queues(envelopes: list[Envelope]) -> dict[str, QueueRow]:
    """The queues the catalog describes after these envelopes."""
    queues: dict[str, QueueRow] = {}
    for envelope in envelopes:
        for event in envelope.events:
            fold_queue_event(queues, event, envelope.at)
    return queues


class QueueChange(NamedTuple):
    """A resize or retirement of a queue, with the record that says when and who, and
    how many partitions the queue had when it came."""

    envelope: Envelope
    event: QueueResized | PartitionsRetired
    partitions: int


def resizes(envelopes: list[Envelope], queue: str) -> list[QueueChange]:
    """The queue's resizes and retirements, oldest first (a queue deleted and created
    again starts over)."""
    queues: dict[str, QueueRow] = {}
    found: list[QueueChange] = []
    for envelope in envelopes:
        for event in envelope.events:
            if isinstance(event, QueueResized | PartitionsRetired) and event.name == queue:
                row = queues.get(queue)
                if row is not None:
                    found.append(QueueChange(envelope, event, row.partitions))
            elif isinstance(event, QueueDeleted) and event.name == queue:
                found = []  # what came before was another queue of that name
            fold_queue_event(queues, event, envelope.at)
    return found


def created_partitions(envelopes: list[Envelope]) -> dict[tuple[str, int], int]:
    """The partitions each live queue was created with, by (name, created_at): what a
    unique job's key is spread over for the queue's life (decision 0037). A resize
    changes how many partitions take jobs, never this."""
    created: dict[str, tuple[int, int]] = {}
    for envelope in envelopes:
        for event in envelope.events:
            if isinstance(event, QueueCreated):
                created.setdefault(event.name, (event.partitions, envelope.at))
            elif isinstance(event, QueueDeleted):
                created.pop(event.name, None)
    return {(name, at): partitions for name, (partitions, at) in created.items()}
