"""Appending to the ledger: turns decided events into records on the right topic and
partition, through the log port. The write side of the data flow; it never reads
the projection.
"""

from __future__ import annotations

from collections.abc import Sequence

from ledger import codec
from ledger.commands import check_queue_name
from ledger.descriptor import JOBS_PER_RECORD, JobDescriptor, local_id_for
from ledger.events import Actor, Enqueued, Envelope, Event, QueueCreated, QueueDeleted
from ledger.log import Append, Log, catalog_topic, queue_topic


class LedgerWriter:
    def __init__(self, log: Log, prefix: str) -> None:
        self.log = log
        self.prefix = prefix

    def topic(self, queue: str) -> str:
        return queue_topic(self.prefix, queue)

    def ensure_catalog(self) -> None:
        self.log.create_topic(catalog_topic(self.prefix), 1)

    def create_queue(self, name: str, partitions: int, at: int, actor: Actor) -> bool:
        """Create the queue's topic, then record the queue in the catalog. False when the
        topic existed already (createQueue is idempotent)."""
        check_queue_name(name)
        if partitions < 1:
            raise ValueError(f"a queue needs at least one partition, got {partitions}")
        self.ensure_catalog()
        if not self.log.create_topic(self.topic(name), partitions):
            return False
        self._append_catalog(QueueCreated(name=name, partitions=partitions), at, actor)
        return True

    def delete_queue(self, name: str, at: int, actor: Actor) -> None:
        """Record the deletion first, so projections drop the queue's rows, then delete
        its topic (its history goes with it, as PinLater dropped its tables)."""
        self._append_catalog(QueueDeleted(name=name), at, actor)
        self.log.delete_topic(self.topic(name))

    def _append_catalog(self, event: Event, at: int, actor: Actor) -> None:
        value = codec.encode(Envelope(at=at, actor=actor, events=(event,)))
        self.log.append([Append(catalog_topic(self.prefix), 0, value)])

    def append(
        self,
        queue: str,
        partition: int,
        events: Sequence[Event],
        at: int,
        actor: Actor,
        traceparent: str | None = None,
    ) -> int:
        """Append events as one record; returns its offset."""
        return self.append_many([(queue, partition, events)], at, actor, traceparent)[0]

    def append_many(
        self,
        batches: Sequence[tuple[str, int, Sequence[Event]]],
        at: int,
        actor: Actor,
        traceparent: str | None = None,
    ) -> list[int]:
        """Append one record per (queue, partition, events); offsets in order."""
        headers = codec.trace_headers(traceparent)
        return self.log.append(
            [
                Append(
                    self.topic(queue),
                    partition,
                    codec.encode(Envelope(at=at, actor=actor, events=tuple(events))),
                    headers,
                )
                for queue, partition, events in batches
            ]
        )

    def enqueue(
        self,
        queue: str,
        partition: int,
        jobs: Sequence[Enqueued],
        at: int,
        actor: Actor,
        traceparent: str | None = None,
    ) -> list[JobDescriptor]:
        """Append enqueue records (at most JOBS_PER_RECORD jobs each) to one partition;
        returns one descriptor per job, in order."""
        chunks = [jobs[i : i + JOBS_PER_RECORD] for i in range(0, len(jobs), JOBS_PER_RECORD)]
        offsets = self.append_many(
            [(queue, partition, chunk) for chunk in chunks], at, actor, traceparent
        )
        return [
            JobDescriptor(queue, partition, job.priority, local_id_for(offset, index))
            for offset, chunk in zip(offsets, chunks, strict=True)
            for index, job in enumerate(chunk)
        ]
