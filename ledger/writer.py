"""Appending to the ledger: turns decided events into records on the right topic and
partition, through the log port. The write side of the data flow; it never reads
the projection.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence

from pinledger.ledger import codec, formats
from pinledger.ledger.commands import check_queue_name
from pinledger.ledger.descriptor import JOBS_PER_RECORD, JobDescriptor, local_id_for
from pinledger.ledger.events import (
    Actor,
    Enqueued,
    Envelope,
    Event,
    FormatRaised,
    PartitionMoved,
    PartitionPlaced,
    PartitionsRetired,
    QueueCreated,
    QueueDeleted,
    QueueResized,
    RecordSkipped,
)
from pinledger.ledger.group_commit import GroupCommit, Part
from pinledger.ledger.log import Append, Log, catalog_topic, queue_topic

# What an append is asked for: the events of one queue's partition.
Batch = tuple[str, int, Sequence[Event]]
# Batches with the trace context their records carry.
Traced = tuple[Sequence[Batch], str | None]
# Where new partitions go (service/placement.py): (queue, partitions, created) -> the
# store shard of each partition to place now.
Placer = Callable[[str, int, bool], Mapping[int, str]]


class LedgerWriter:
    def __init__(self, log: Log, prefix: str) -> None:
        self.log = log
        self.prefix = prefix
        # The newest offset this writer appended per (topic, partition): what a read on
        # this server waits for the projection to reach (read-your-writes).
        self.appended: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()
        # Plain records only until told the cluster's format (`follow_format`): what
        # every release reads. A server follows the catalog's format; a command that
        # appends without following it (the dashboard's actions, an import) never
        # writes a record some live server could not read.
        self.group = GroupCommit(log, grouping=False)
        self.cluster_format = formats.PLAIN
        # Places the partitions a creation or resize adds on store shards (decision
        # 0031); None, or a map of one shard: every partition on the one store.
        self.placer: Placer | None = None

    def topic(self, queue: str) -> str:
        return queue_topic(self.prefix, queue)

    def follow_format(self, cluster_format: int) -> None:
        """Write what the cluster's ledger format allows (ledger/formats.py): group
        records from format 2 on."""
        self.group.grouping = cluster_format >= formats.GROUPED
        self.cluster_format = cluster_format

    def ensure_catalog(self, at: int, actor: Actor) -> None:
        """Create the catalog topic when it is missing. A catalog created here starts at
        the newest ledger format: no server of an older release can be live in a
        cluster that had no catalog. It keeps its records forever, whatever the
        retention: a few per queue, and the cluster's ledger format (decision 0025)."""
        if self.log.create_topic(catalog_topic(self.prefix), 1, keep_forever=True):
            self.raise_format(formats.LATEST, at, actor)

    def raise_format(self, cluster_format: int, at: int, actor: Actor) -> None:
        """Record the cluster's ledger format in the catalog (`pinledger
        upgrade-format` checks first that every live server reads it)."""
        self._append_catalog(FormatRaised(format=cluster_format), at, actor)

    def create_queue(self, name: str, partitions: int, at: int, actor: Actor) -> bool:
        """Create the queue's topic, then record the queue in the catalog. False when the
        topic existed already (createQueue is idempotent)."""
        check_queue_name(name)
        if partitions < 1:
            raise ValueError(f"a queue needs at least one partition, got {partitions}")
        self.ensure_catalog(at, actor)
        # Placed before the topic exists: a store that cannot say fails the call with
        # nothing created, so the caller's retry creates the queue.
        placed = self._placements(name, partitions, new=True)
        if not self.log.create_topic(self.topic(name), partitions):
            return False
        self._append_catalog(QueueCreated(name=name, partitions=partitions), at, actor, placed)
        return True

    def resize_queue(self, name: str, partitions: int, at: int, actor: Actor, reason: str) -> None:
        """Give the queue's topic at least `partitions` partitions (Kafka's first, so
        that no record ever names a partition the topic lacks), then record that the
        queue takes jobs on that many. Only when the cluster's ledger format has queue
        resizes (format 2): a server of an older release could not read the record."""
        check_queue_name(name)
        if partitions < 1:
            raise ValueError(f"a queue needs at least one partition, got {partitions}")
        if self.cluster_format < formats.RESIZES:
            raise formats.FormatTooOldError(
                f"resizing a queue needs ledger format {formats.RESIZES}; the cluster writes "
                f"format {self.cluster_format}: run `pinledger upgrade-format` once every "
                "server runs this release (README, Upgrading)"
            )
        placed = self._placements(name, partitions, new=False)
        self.log.add_partitions(self.topic(name), partitions)
        self._append_catalog(QueueResized(name, partitions, reason), at, actor, placed)

    def retire_partitions(self, name: str, first: int, at: int, actor: Actor, reason: str) -> None:
        """Record that the queue's partitions `first` and above are retired (drained and
        empty; `first` equal to the partition count: none are). Written only after a
        resize, so only on a cluster at ledger format 2 or later; checked all the same."""
        check_queue_name(name)
        if self.cluster_format < formats.RESIZES:
            raise formats.FormatTooOldError(
                f"retiring partitions needs ledger format {formats.RESIZES}; the cluster "
                f"writes format {self.cluster_format}"
            )
        self._append_catalog(PartitionsRetired(name, first, reason), at, actor)

    def move_partition(self, move: PartitionMoved, at: int, actor: Actor) -> None:
        """Record that a partition's projection moves to another store shard (decision
        0031), on a cluster whose ledger format has moves (format 2)."""
        check_queue_name(move.name)
        if self.cluster_format < formats.MOVES:
            raise formats.FormatTooOldError(
                f"moving a partition needs ledger format {formats.MOVES}; the cluster "
                f"writes format {self.cluster_format}: run `pinledger upgrade-format` once "
                "every server runs this release (README, Upgrading)"
            )
        self._append_catalog(move, at, actor)

    def skip_record(self, skip: RecordSkipped, at: int, actor: Actor) -> None:
        """Record that a queue record is never applied (`pinledger skip-record`), on a
        cluster whose ledger format has skips (format 3): a server of an older release
        would not read the catalog record, and would stall on the skipped one."""
        check_queue_name(skip.name)
        if self.cluster_format < formats.SKIPS:
            raise formats.FormatTooOldError(
                f"skipping a record needs ledger format {formats.SKIPS}; the cluster writes "
                f"format {self.cluster_format}: run `pinledger upgrade-format` once every "
                "server runs this release (README, Upgrading)"
            )
        self._append_catalog(skip, at, actor)

    def delete_queue(self, name: str, at: int, actor: Actor) -> None:
        """Record the deletion first, so projections drop the queue's rows, then delete
        its topic (its history goes with it, as PinLater dropped its tables)."""
        self._append_catalog(QueueDeleted(name=name), at, actor)
        self.log.delete_topic(self.topic(name))

    def _placements(self, name: str, partitions: int, new: bool) -> list[PartitionPlaced]:
        """The placement records of the partitions a creation or resize adds, in the
        creation's or resize's record: no server sees the new partitions before it sees
        where they are. None below the format that has them (an older server could not
        read them): the partitions stay on the home shard."""
        if self.placer is None or self.cluster_format < formats.PLACEMENTS:
            return []
        why = "queue created" if new else "queue resized"
        shards = self.placer(name, partitions, new)
        return [PartitionPlaced(name, p, shard, why) for p, shard in sorted(shards.items())]

    def _append_catalog(
        self, event: Event, at: int, actor: Actor, more: Sequence[Event] = ()
    ) -> None:
        value = codec.encode(Envelope(at=at, actor=actor, events=(event, *more)))
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
        batches: Sequence[Batch],
        at: int,
        actor: Actor,
        traceparent: str | None = None,
    ) -> list[int]:
        """Append the events of each (queue, partition, events); returns the offset of
        the record each landed in, in order. Concurrent callers to one partition share
        records (group_commit.py)."""
        return self.append_traced([(batches, traceparent)], at, actor)[0]

    def append_traced(self, sets: Sequence[Traced], at: int, actor: Actor) -> list[list[int]]:
        """Append several sets of batches, each with its own trace context, in one group
        commit: one round trip for all of them (a dequeue's piggybacked acks and its
        claims), the parts of one partition in one record, in the order given. Returns
        each set's offsets."""
        parts = self._commit([(batch, tp) for batches, tp in sets for batch in batches], at, actor)
        offsets = iter(part.offset for part in parts)
        return [[next(offsets) for _ in batches] for batches, _ in sets]

    def append_records(
        self,
        batches: Sequence[Batch],
        at: int,
        actor: Actor,
    ) -> list[int]:
        """One record of its own per (queue, partition, events), never shared: for
        what needs the offsets to move (import_guard's fillers)."""
        value_of = codec.encode
        appends = [
            Append(self.topic(queue), partition, value_of(Envelope(at, actor, tuple(events))))
            for queue, partition, events in batches
        ]
        offsets = self.log.append(appends)
        self._note([(a.topic, a.partition) for a in appends], offsets)
        return offsets

    def _commit(
        self, batches: Sequence[tuple[Batch, str | None]], at: int, actor: Actor
    ) -> list[Part]:
        parts = []
        for (queue, partition, events), traceparent in batches:
            envelope = Envelope(at=at, actor=actor, events=tuple(events))
            value = codec.encode(envelope)
            parts.append(
                Part(
                    self.topic(queue),
                    partition,
                    value,
                    codec.encode_part(envelope, traceparent, value),
                    traceparent,
                    len(envelope.events),
                )
            )
        self.group.append(parts)
        self._note([p.key for p in parts], [p.offset for p in parts])
        return parts

    def _note(self, keys: Sequence[tuple[str, int]], offsets: Sequence[int]) -> None:
        with self._lock:
            for key, offset in zip(keys, offsets, strict=True):
                if offset > self.appended.get(key, -1):
                    self.appended[key] = offset

    def enqueue(
        self,
        queue: str,
        partition: int,
        jobs: Sequence[Enqueued],
        at: int,
        actor: Actor,
        traceparent: str | None = None,
    ) -> list[JobDescriptor]:
        """Append enqueue records (at most JOBS_PER_RECORD jobs and about
        RECORD_BODY_BYTES of bodies each) to one partition; returns one descriptor per
        job, in order."""
        chunks = _chunks(jobs)
        parts = self._commit(
            [((queue, partition, chunk), traceparent) for chunk in chunks], at, actor
        )
        return [
            JobDescriptor(queue, partition, job.priority, local_id_for(part.offset, part.first + i))
            for part, chunk in zip(parts, chunks, strict=True)
            for i, job in enumerate(chunk)
        ]


# Bodies per record, before base64: keeps an enqueue record well under the broker's
# 1 MiB default record limit while still batching many small jobs into one record.
RECORD_BODY_BYTES = 256 * 1024


def _chunks(jobs: Sequence[Enqueued]) -> list[Sequence[Enqueued]]:
    chunks: list[Sequence[Enqueued]] = []
    start, size = 0, 0
    for i, job in enumerate(jobs):
        if i > start and (i - start >= JOBS_PER_RECORD or size + len(job.body) > RECORD_BODY_BYTES):
            chunks.append(jobs[start:i])
            start, size = i, 0
        size += len(job.body)
    if start < len(jobs):
        chunks.append(jobs[start:])
    return chunks
